"""``python in_dir.py DIR CMD...``: run CMD in DIR (cosmic-ray starts tests without a cwd)."""

import os
import sys

os.chdir(sys.argv[1])
os.execv(sys.argv[2], sys.argv[2:])
