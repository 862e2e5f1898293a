"""Manifest links and report links resolve in this copy of the suite (issue 43, item 4):
``link`` is optional, checked when it points into the repository, and the shipped manifests
link only to what the wheel ships."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from conformance.runner import links
from conformance.runner.manifests import EXPECTED_DIR, ManifestError, load
from conftest import REPO


def _load(tmp_path: Path, body: str):
    path = tmp_path / "m.toml"
    path.write_text('[STORE-MAP-001]\nmode = "xfail"\nreason = "r"\n' + body)
    return path, load(path)[1]["STORE-MAP-001"]


@pytest.mark.parametrize(
    "body, link",
    [
        ("", None),  # optional
        (
            'link = "https://example.org/our-store/issues/7"\n',
            "https://example.org/our-store/issues/7",
        ),
        ('link = "notes/our-store.md#no-such-heading"\n', "notes/our-store.md#no-such-heading"),
        ('link = "conformance/SPEC.md#c1.1"\n', "conformance/SPEC.md#c1.1"),
    ],
)
def test_link_is_optional_and_a_path_elsewhere_is_not_judged(tmp_path, body, link):
    assert _load(tmp_path, body)[1].link == link


@pytest.mark.parametrize(
    "link, problem",
    [
        ('""', "'link' must be a non-empty string when given"),
        ("3", "'link' must be a non-empty string when given"),
        (
            '"conformance/SPEC.md#c99.9"',
            "link 'conformance/SPEC.md#c99.9': no heading in conformance/SPEC.md has the "
            "anchor #c99.9",
        ),
        ('"conformance/NOPE.md"', "link 'conformance/NOPE.md': no such file conformance/NOPE.md"),
        (
            '"docs/findings/nope.md#x"',
            "link 'docs/findings/nope.md#x': no such file docs/findings/nope.md",
        ),
    ],
)
def test_a_bad_link_into_the_repository_is_an_exact_error(tmp_path, link, problem):
    path = tmp_path / "m.toml"
    path.write_text(f'[STORE-MAP-001]\nmode = "xfail"\nreason = "r"\nlink = {link}\n')
    with pytest.raises(ManifestError) as err:
        load(path)
    assert str(err.value) == f"manifest {path}: [STORE-MAP-001]: {problem}"


def test_shipped_manifests_link_only_to_shipped_files():
    """The wheel ships conformance/ and docs/findings/*.md (pyproject.toml): every link of a
    shipped manifest is into those (checked by ``load``) or a URL."""
    for path in sorted(EXPECTED_DIR.glob("*.toml")):
        load(path)  # every link into the repository resolves, anchors included
        for cid, body in tomllib.loads(path.read_text()).items():
            link = body.get("link") if isinstance(body, dict) else None
            if link is not None:
                assert links.is_url(link) or links.is_shipped(link), (path.name, cid, link)


def _wheel_layout() -> dict[str, str]:
    """Each repository folder the wheel ships -> where it lands (pyproject.toml's target)."""
    wheel = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert "exclude" not in wheel and "sources" not in wheel, "this test would need to know them"
    return {**{folder: folder for folder in wheel["only-include"]}, **wheel["force-include"]}


WHEEL_LAYOUT = _wheel_layout()


def _in_wheel(path: Path) -> str | None:
    """``path`` (in the repository) as the wheel names it, or None if the wheel lacks it."""
    rel = path.resolve().relative_to(REPO).as_posix()
    for folder, shipped in WHEEL_LAYOUT.items():
        if rel == folder or rel.startswith(folder + "/"):
            return shipped + rel.removeprefix(folder)
    return None


def test_the_findings_links_resolve_in_the_repository_and_in_the_wheel():
    """Every relative link of a finding names a file or folder that exists here, and that
    the wheel ships at the same relative place (a reader of an installed suite follows it)."""
    import re

    findings = REPO / "docs" / "findings"
    checked = 0
    for page in sorted(findings.glob("*.md")):
        for link in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if links.is_url(link) or link.startswith("#"):
                continue
            target = (page.parent / link.partition("#")[0]).resolve()
            assert target.exists(), (page.name, link)
            page_in_wheel, target_in_wheel = _in_wheel(page), _in_wheel(target)
            assert target_in_wheel is not None, (page.name, link, "not shipped in the wheel")
            # the same relative link, followed from where the wheel puts the page
            followed = os.path.normpath(Path(page_in_wheel).parent / link.partition("#")[0])
            assert followed == target_in_wheel, (page.name, link, followed, target_in_wheel)
            checked += 1
    assert checked >= 20, checked


def test_for_reader_relative_under_the_folder_else_absolute(tmp_path):
    spec = REPO / "conformance" / "SPEC.md"
    assert (
        links.for_reader("conformance/SPEC.md#c1.1", REPO, within=True)
        == "conformance/SPEC.md#c1.1"
    )
    assert links.for_reader("conformance/SPEC.md#c1.1", tmp_path, within=True) == f"{spec}#c1.1"
    # Relative, and leading from tmp_path to the spec wherever the checkout lies (a clone
    # under /tmp shares a folder with tmp_path: fewer "../" than the depth of tmp_path).
    rel, _, anchor = links.for_reader("conformance/SPEC.md#c1.1", tmp_path).partition("#")
    assert anchor == "c1.1" and not Path(rel).is_absolute() and rel.startswith("../"), rel
    assert (tmp_path / rel).resolve() == spec.resolve()
    assert links.for_reader("https://x.org/a#b", tmp_path) == "https://x.org/a#b"
    assert links.for_reader("notes/ours.md#a", tmp_path) == "notes/ours.md#a"


def test_locate_falls_back_to_the_shipped_findings(tmp_path, monkeypatch):
    """Installed, docs/findings/X.md lives at conformance/findings/X.md (pyproject.toml)."""
    (tmp_path / "conformance" / "findings").mkdir(parents=True)
    (tmp_path / "conformance" / "findings" / "zict.md").write_text("# Zict\n")
    monkeypatch.setattr(links, "ROOT", tmp_path)
    monkeypatch.setattr(links, "SHIPPED_FINDINGS", tmp_path / "conformance" / "findings")
    assert links.locate("docs/findings/zict.md") == tmp_path / "conformance/findings/zict.md"
    assert links.locate("docs/findings/nope.md") is None
    assert links.into_repository("docs/findings/zict.md#zict")
    assert not links.into_repository("docs/benchmarks.md")  # no docs/ folder installed
