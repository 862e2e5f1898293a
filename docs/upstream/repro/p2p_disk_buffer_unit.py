"""DiskShardsBuffer.read: a deleted file, an emptied file and an output that was never
written to all raise the same DataUnavailable, which the shuffle turns into an empty
output partition."""

import asyncio
import os
import tempfile
from pathlib import Path

from distributed.shuffle._disk import DiskShardsBuffer
from distributed.shuffle._limiter import ResourceLimiter


def read_bytes(path: Path) -> tuple[bytes, int]:
    data = path.read_bytes()
    return data, len(data)


async def main() -> None:
    async with DiskShardsBuffer(
        directory=tempfile.mkdtemp(), read=read_bytes, memory_limiter=ResourceLimiter(None)
    ) as buf:
        await buf.write({"deleted": b"0" * 100, "emptied": b"1" * 100})
        await buf.flush()
        os.remove(buf.directory / "deleted")
        os.truncate(buf.directory / "emptied", 0)
        for id in ("deleted", "emptied", "never-written"):
            try:
                buf.read(id)
                print(f"{id}: no error")
            except Exception as exc:
                print(f"{id}: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    asyncio.run(main())
