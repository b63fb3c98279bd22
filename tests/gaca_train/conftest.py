from __future__ import annotations

import sys
from pathlib import Path

# The trainer tests share plain helper modules (tiny_setup.py) that sit beside them.
sys.path.insert(0, str(Path(__file__).parent))
