"""The network switch and admin gating (app/admin.py): on loopback the one user is the admin; served to a network
the pages and actions that change the server need the admin secret, and the server refuses to start open to the
network without one. Driven by the refusal command and Streamlit's AppTest (no browser)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from app_runs import run_without_exception
from streamlit.testing.v1 import AppTest

from app import admin

ROOT = Path(__file__).resolve().parents[2]
MAIN = str(ROOT / "app" / "main.py")
SECRET = "correct horse battery staple"


def _check_serve(*args: str, secret: str | None = None, network: str | None = None, cwd: Path = ROOT
                 ) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in (admin.SECRET_ENV, admin.NETWORK_ENV)}
    env["PYTHONPATH"] = str(ROOT)
    if secret is not None:
        env[admin.SECRET_ENV] = secret
    if network is not None:
        env[admin.NETWORK_ENV] = network
    return subprocess.run([sys.executable, "-m", "app.admin", "check-serve", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_server_refuses_to_start_open_to_the_network_without_a_secret():
    """Every non-loopback bind (and ENGINE_NETWORK=1 on loopback) without a secret exits 2 with a message naming
    the variable to set; loopback needs none; a secret of 12+ characters lets it start; a short one does not."""
    for args in (["--server.address", "0.0.0.0"], ["--server.address=192.168.1.5"], ["--server.address", ""],
                 ["--server.address", "127.0.0.1", "--server.address", "0.0.0.0"]):  # the last one counts
        out = _check_serve(*args)
        assert out.returncode == 2, (args, out.stderr)
        assert "Refusing to serve" in out.stderr and admin.SECRET_ENV in out.stderr and "secrets.toml" in out.stderr
    assert _check_serve("--server.address", "127.0.0.1", network="1").returncode == 2
    assert _check_serve("--server.address", "127.0.0.1").returncode == 0
    assert _check_serve("--server.address", "0.0.0.0", "--server.address", "127.0.0.1").returncode == 0
    assert _check_serve().returncode == 0, "the checkout's config binds loopback"
    assert _check_serve("--server.address", "0.0.0.0", secret=SECRET).returncode == 0
    short = _check_serve("--server.address", "0.0.0.0", secret="short")
    assert short.returncode == 2 and "at least" in short.stderr


def test_the_secret_may_come_from_streamlits_secrets_file(tmp_path):
    """`admin_secret` in .streamlit/secrets.toml of the working directory counts as the secret."""
    assert _check_serve("--server.address", "0.0.0.0", cwd=tmp_path).returncode == 2
    (tmp_path / ".streamlit").mkdir()
    (tmp_path / ".streamlit" / "secrets.toml").write_text(f'{admin.SECRET_NAME} = "{SECRET}"\n', encoding="utf-8")
    assert _check_serve("--server.address", "0.0.0.0", cwd=tmp_path).returncode == 0


def test_start_script_runs_the_refusal_check_with_the_users_arguments_before_serving():
    lines = (ROOT / "scripts" / "start.sh").read_text(encoding="utf-8").splitlines()
    check = next(i for i, s in enumerate(lines) if "-m app.admin check-serve" in s)
    serve = next(i for i, s in enumerate(lines) if s.startswith("exec ") and "streamlit run" in s)
    assert check < serve and '"$@"' in lines[check] and not lines[check].rstrip().endswith("|| true")


@pytest.mark.parametrize(("address", "loopback"), [
    ("127.0.0.1", True), ("127.8.0.1", True), ("::1", True), ("[::1]", True), ("localhost", True),
    ("0.0.0.0", False), ("", False), (None, False), ("::", False), ("10.1.2.3", False), ("example.org", False)])
def test_only_loopback_addresses_count_as_local(address, loopback):
    assert admin.is_loopback(address) is loopback


def test_secret_comparison_accepts_only_the_exact_secret():
    """A prefix, an extension, a case change or nothing is refused (compared as SHA-256 digests with
    hmac.compare_digest: constant time in the content and the length)."""
    assert admin.secret_matches(SECRET, SECRET)
    for wrong in (SECRET[:-1], SECRET + " ", SECRET.upper(), "", None):
        assert not admin.secret_matches(wrong, SECRET), wrong


@pytest.fixture()
def network(monkeypatch, models_cache, toy_classifier, tmp_path):
    """Served to a network with the admin secret set; a models cache with the toy model; stores in tmp_path."""
    from engine.models import save_classifier

    save_classifier(toy_classifier, "toy-admin")
    monkeypatch.setenv(admin.NETWORK_ENV, "1")
    monkeypatch.setenv(admin.SECRET_ENV, SECRET)
    monkeypatch.setenv("ENGINE_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("ENGINE_ANNOTATIONS_DB", str(tmp_path / "annotations.sqlite3"))
    monkeypatch.setattr(admin, "FAILED_SIGN_IN_DELAY_S", 0.0)


def _run(at: AppTest) -> AppTest:
    return run_without_exception(at, timeout=120)


def test_open_to_the_network_without_a_secret_the_app_serves_nothing(monkeypatch, models_cache):
    """Started some other way than scripts/start.sh: every visit shows the refusal and no page, no sidebar."""
    monkeypatch.setenv(admin.NETWORK_ENV, "1")
    monkeypatch.delenv(admin.SECRET_ENV, raising=False)
    at = _run(AppTest.from_file(MAIN, default_timeout=120))
    assert any("Refusing to serve" in e.value for e in at.error)
    assert not at.title and not at.sidebar.selectbox and not at.text_area


@pytest.mark.parametrize("page", ["pages/models.py", "pages/data.py", "pages/study_admin.py", "pages/annotate.py"])
def test_gated_pages_refuse_a_visitor_without_the_secret(network, page):
    """Opened directly (as a URL would, were it in the navigation), Models, Your data, Studies and Annotate show only the refusal:
    no title, no form, no uploader, no button."""
    at = _run(AppTest.from_file(str(ROOT / page), default_timeout=120))
    assert any("sign in as the admin" in e.value for e in at.error)
    assert not at.title and not at.button and not at.text_input and not at.get("file_uploader")


def _signed_in_app(secret: str | None) -> AppTest:
    at = _run(AppTest.from_file(MAIN, default_timeout=120))
    if secret is not None:
        at.sidebar.text_input(key="admin_secret_input").input(secret)
        next(b for b in at.sidebar.button if b.label == "Sign in").click()
        _run(at)
    return at


MODELS, DATA = str(ROOT / "pages" / "models.py"), str(ROOT / "pages" / "data.py")


def _not_in_navigation(at: AppTest, page: str) -> bool:
    """True when the app's st.navigation has no such page (AppTest refuses to switch to it, as Streamlit falls
    back to the start page for its URL)."""
    try:
        at.switch_page(page)
    except ValueError as err:
        return "Could not find a navigation page" in str(err)
    return False


def test_a_visitor_reaches_models_only_after_signing_in_with_the_secret(network):
    """Served to a network: Models and Your data are not in the navigation of a visitor nor of one who typed a
    wrong secret; the session that typed the right one has them and Models opens; signing out removes them."""
    at = _signed_in_app(None)
    assert at.sidebar.selectbox[0].value == "toy-admin", "the read-only pages still work for a visitor"
    assert _not_in_navigation(at, MODELS) and _not_in_navigation(at, DATA)

    at = _signed_in_app("wrong secret entirely")
    assert any("Wrong secret" in e.value for e in at.sidebar.error)
    assert _not_in_navigation(at, MODELS) and _not_in_navigation(at, DATA)

    at = _signed_in_app(SECRET)
    assert any("Signed in" in c.value for c in at.sidebar.caption)
    at.switch_page(MODELS)
    _run(at)
    assert any(t.value == "Models" for t in at.title) and not at.error
    next(b for b in at.sidebar.button if b.label == "Sign out").click()
    _run(at)
    assert _not_in_navigation(at, MODELS)


def test_compute_cells_and_the_annotate_page_are_for_the_admin_only(network):
    """The Benchmarks page's compute form (it writes to the results store) is absent for a visitor and present
    for the admin; the Annotate page (free-form annotations under any typed name, and task preparation) is not
    in a visitor's navigation and refuses when opened directly."""
    at = _signed_in_app(None)
    at.switch_page(str(ROOT / "pages" / "benchmarks.py"))
    _run(at)
    assert not any("Compute cells" in e.label for e in at.expander)
    assert _not_in_navigation(at, str(ROOT / "pages" / "annotate.py"))
    page = _run(AppTest.from_file(str(ROOT / "pages" / "annotate.py"), default_timeout=120))
    assert any("sign in as the admin" in e.value for e in page.error) and not page.text_input

    at = _signed_in_app(SECRET)
    at.switch_page(str(ROOT / "pages" / "benchmarks.py"))
    _run(at)
    assert any("Compute cells" in e.label for e in at.expander)
    at.switch_page(str(ROOT / "pages" / "annotate.py"))
    _run(at)
    assert any("Prepare annotation tasks" in e.label for e in at.expander)


def test_on_loopback_the_one_user_is_the_admin(monkeypatch, models_cache):
    """The default bind (127.0.0.1 from .streamlit/config.toml): no sign-in box and Models opens, as before."""
    monkeypatch.delenv(admin.NETWORK_ENV, raising=False)
    monkeypatch.delenv(admin.SECRET_ENV, raising=False)
    at = _run(AppTest.from_file(MAIN, default_timeout=120))
    assert not any(e.label == "Admin" for e in at.sidebar.expander)
    at.switch_page(MODELS)
    _run(at)
    assert any(t.value == "Models" for t in at.title)
