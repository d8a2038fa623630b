import pytest

pytestmark = pytest.mark.django_db


def test_it_redirects_the_root_to_the_test_tab(client):
    r = client.get("/")
    assert r.status_code == 302 and r["Location"] == "/test"


def test_it_refuses_post_on_tabs(client):
    assert client.post("/build").status_code == 405


def test_it_refuses_unknown_hosts(db):
    from django.test import Client

    assert Client(HTTP_HOST="evil.example").get("/test").status_code == 400


def test_the_admin_is_hidden_until_a_user_exists_then_asks_for_a_login(client):
    from django.contrib.auth import get_user_model

    assert client.get("/admin/").status_code == 404
    assert client.get("/admin/login/").status_code == 404
    get_user_model().objects.create_superuser("admin", password="a long passphrase")
    r = client.get("/admin/")
    assert r.status_code == 302 and "/admin/login/" in r["Location"]


def test_pages_carry_a_content_security_policy_without_inline_script(client):
    policy = client.get("/test")["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "unsafe-eval" not in policy
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy


def test_the_access_token_guards_every_page_but_v1(client, settings):
    settings.GAMBIT_ACCESS_TOKEN = "tok-123"
    assert client.get("/test").status_code == 401
    assert client.get("/test?token=nope").status_code == 401
    r = client.get("/test?token=tok-123&q=x")
    assert r.status_code == 302 and r["Location"] == "/test?q=x"
    assert client.get("/test").status_code == 200  # the cookie now
    assert client.get("/v1/models").status_code == 401  # API keys, not the token
    assert "error" in client.get("/v1/models").json()
