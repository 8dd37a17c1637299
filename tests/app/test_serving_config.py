"""The dashboard serves on loopback only by default and caps uploads: what Streamlit reads from
.streamlit/config.toml in the checkout, and what scripts/start.sh passes."""
from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_streamlit_reads_a_loopback_address_and_an_upload_cap_from_the_checkout():
    """Streamlit itself, started in the checkout, binds 127.0.0.1, refuses uploads over 50 MB and watches no source
    file (its defaults are every interface, 200 MB and a watcher that polls the files while the server runs)."""
    code = ("import json; from streamlit import config; config.get_config_options(force_reparse=True); "
            "print(json.dumps({k: config.get_option(k) for k in "
            "('server.address', 'server.maxUploadSize', 'server.enableXsrfProtection', 'server.fileWatcherType')}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120)
    options = json.loads(out.stdout.strip().splitlines()[-1])
    assert options == {"server.address": "127.0.0.1", "server.maxUploadSize": 50, "server.enableXsrfProtection": True,
                       "server.fileWatcherType": "none"}
    assert tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))["server"]["address"] == "127.0.0.1"


def test_start_script_binds_loopback_before_the_users_arguments():
    """start.sh passes --server.address 127.0.0.1 before "$@", so a user's own --server.address (the last wins)
    still opens it up deliberately."""
    line = next(s for s in (ROOT / "scripts" / "start.sh").read_text(encoding="utf-8").splitlines()
                if s.startswith("exec ") and "streamlit run" in s)
    assert "--server.address 127.0.0.1" in line
    assert line.index("--server.address 127.0.0.1") < line.index('"$@"')


def test_configuration_docs_say_how_to_serve_to_others_and_where_uploads_go():
    docs = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert "127.0.0.1" in docs and "--server.address 0.0.0.0" in docs and "maxUploadSize" in docs
    assert "never copied" not in docs and "uploads/" in docs
