"""``python -m ci.gpu_check``: see the package's docstring."""

from .run import main

raise SystemExit(main())
