"""SHA-256 over the code files (the paths code_version() covers) as they are here: the device has no .git, so
the digest, compared with the same digest of a commit, shows which commit's code ran."""
import hashlib
import sys
from pathlib import Path

files = [line.strip() for line in open(sys.argv[1]) if line.strip()]
h = hashlib.sha256()
for f in files:
    h.update(f.encode() + b"\0" + (Path(f).read_bytes() if Path(f).is_file() else b"<missing>") + b"\0")
print(h.hexdigest())
