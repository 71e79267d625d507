"""The results a chess game may end with, as PGN writes them: one tuple every reader and scheme indexes.

>>> RESULTS.index("1/2-1/2")
2
"""

from __future__ import annotations

#: PGN's four game results (the ``Result`` tag and the movetext's last word), in the order whose
#: indices the reader's columns and the schemes' result tokens use.
RESULTS = ("1-0", "0-1", "1/2-1/2", "*")
