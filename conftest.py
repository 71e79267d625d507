"""Collection rules for the whole repository: the torch adapters are collected only with torch."""

import importlib.util

collect_ignore = []
if importlib.util.find_spec("torch") is None:  # `./dev test` installs it; plain pytest may not have it
    collect_ignore += ["src/tokpack/torch.py", "src/tokpack/serve/torch.py"]
