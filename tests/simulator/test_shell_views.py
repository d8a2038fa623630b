import pytest

pytestmark = pytest.mark.django_db


def test_it_redirects_the_root_to_the_test_tab(client):
    r = client.get("/")
    assert r.status_code == 302 and r["Location"] == "/test/"


def test_it_refuses_post_on_tabs(client):
    assert client.post("/build/").status_code == 405


def test_it_refuses_unknown_hosts(db):
    from django.test import Client

    assert Client(HTTP_HOST="evil.example").get("/test/").status_code == 400


def test_the_admin_asks_for_a_login(client):
    r = client.get("/admin/")
    assert r.status_code == 302 and "/admin/login/" in r["Location"]
