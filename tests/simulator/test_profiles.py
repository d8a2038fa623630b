from simulator.profiles import build_settings, database_from_url, profile_name


def test_it_defaults_to_the_embedded_profile(tmp_path):
    s = build_settings({"GAMBIT_SIM_DB": str(tmp_path / "db.sqlite3")})
    assert s["GAMBIT_PROFILE"] == "embedded"
    db = s["DATABASES"]["default"]
    assert db["ENGINE"] == "django.db.backends.sqlite3"
    assert "journal_mode=WAL" in db["OPTIONS"]["init_command"]
    assert s["CHANNEL_LAYERS"]["default"]["BACKEND"] == "channels.layers.InMemoryChannelLayer"
    assert s["GAMBIT_INPROCESS_WORKERS"] > 0
    assert s["ALLOWED_HOSTS"][:2] == ["127.0.0.1", "localhost"]
    assert (tmp_path / "secret_key").exists()
    assert (
        build_settings({"GAMBIT_SIM_DB": str(tmp_path / "db.sqlite3")})["SECRET_KEY"]
        == s["SECRET_KEY"]
    )


def test_it_writes_nothing_when_the_state_folder_is_missing(tmp_path):
    build_settings({"GAMBIT_SIM_DB": str(tmp_path / "missing" / "db.sqlite3")})
    assert not (tmp_path / "missing").exists()


def test_it_needs_both_urls_for_the_distributed_profile(tmp_path):
    assert profile_name({"DATABASE_URL": "postgres://x/y"}) == "embedded"
    s = build_settings(
        {
            "DATABASE_URL": "postgres://u:p%40ss@db.example:5433/gambit",
            "REDIS_URL": "redis://127.0.0.1:6379/3",
            "GAMBIT_SIM_DB": str(tmp_path / "x.sqlite3"),
        }
    )
    assert s["GAMBIT_PROFILE"] == "distributed"
    db = s["DATABASES"]["default"]
    assert (db["ENGINE"], db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]) == (
        "django.db.backends.postgresql",
        "gambit",
        "u",
        "p@ss",
        "db.example",
        "5433",
    )
    layer = s["CHANNEL_LAYERS"]["default"]
    assert layer["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    assert layer["CONFIG"]["hosts"] == ["redis://127.0.0.1:6379/3"]
    assert s["GAMBIT_INPROCESS_WORKERS"] == 0


def test_a_pool_size_of_zero_keeps_one_connection_per_thread(tmp_path):
    """`gambit worker` sets GAMBIT_DB_POOL_SIZE=0: its threads are fixed (slots, the run
    loop's database thread), so each keeps its connection instead of handing it back to a
    pool at every task and checking it with a round trip when taken again."""
    env = {
        "DATABASE_URL": "postgres://u@127.0.0.1:5432/gambit",
        "REDIS_URL": "redis://127.0.0.1:6379/3",
        "GAMBIT_SIM_DB": str(tmp_path / "x.sqlite3"),
    }
    pooled = build_settings(env)["DATABASES"]["default"]
    assert pooled["CONN_MAX_AGE"] == 0 and pooled["OPTIONS"]["pool"]["max_size"] == 16
    kept = build_settings({**env, "GAMBIT_DB_POOL_SIZE": "0"})["DATABASES"]["default"]
    assert kept["CONN_MAX_AGE"] is None and "pool" not in kept["OPTIONS"]


def test_kept_connections_prepare_what_they_run_often(tmp_path):
    """A `gambit worker`'s kept connections bind parameters on the server and prepare a
    statement from its fifth run (tests/decks_app/runs/test_rows.py shows PostgreSQL holding
    them); the server's pool does not; GAMBIT_DB_PREPARED_STATEMENTS=0 turns it off."""
    env = {
        "DATABASE_URL": "postgres://u@127.0.0.1:5432/gambit",
        "REDIS_URL": "redis://127.0.0.1:6379/3",
        "GAMBIT_SIM_DB": str(tmp_path / "x.sqlite3"),
    }
    kept = build_settings({**env, "GAMBIT_DB_POOL_SIZE": "0"})["DATABASES"]["default"]
    assert kept["OPTIONS"] == {"server_side_binding": True, "prepare_threshold": 5}
    pooled = build_settings(env)["DATABASES"]["default"]
    assert "server_side_binding" not in pooled["OPTIONS"]
    off = {**env, "GAMBIT_DB_POOL_SIZE": "0", "GAMBIT_DB_PREPARED_STATEMENTS": "0"}
    assert build_settings(off)["DATABASES"]["default"]["OPTIONS"] == {}


def test_it_rejects_a_non_postgres_database_url():
    import pytest

    with pytest.raises(ValueError):
        database_from_url("mysql://x/y")


def test_the_banner_says_when_a_provider_is_only_assumed_at_its_default_address():
    from decks_app.runs.providers import banner_lines

    lines = banner_lines({})
    (ollama,) = [line for line in lines if "ollama" in line]
    assert ollama.startswith("  [x] ollama (default address http") and ollama.endswith(
        ", not checked)"
    )
    (configured,) = [
        line
        for line in banner_lines({"OLLAMA_BASE_URL": "http://gpu:11434/v1"})
        if "ollama" in line
    ]
    assert configured == "  [x] ollama"
    assert "  [ ] openrouter: OPENROUTER_API_KEY is not set" in lines


def test_the_session_model_follows_gambit_toml_routing():
    from decks_app.runs.providers import OFFLINE_MODEL, effective_model
    from gambit.providers import ProviderRouter
    from gambit.providers._config import parse_config

    config = parse_config(
        '[providers]\ndefault = "ollama"\n[models.aliases]\nfast = "openrouter/openai/gpt-4o-mini"\n'
    )
    router = ProviderRouter(config=config, env={})
    # Unprefixed models go to the configured default provider (ollama needs no key).
    assert effective_model("", ["llama3.1"], router) == (None, "llama3.1", False)
    # An alias is judged by what it expands to (openrouter, unconfigured here).
    assert effective_model("", ["fast"], router) == (OFFLINE_MODEL, OFFLINE_MODEL, True)
    # A deck that names no model is answered by the demo model too, as in the CLI.
    assert effective_model("", [], router) == (OFFLINE_MODEL, OFFLINE_MODEL, True)
    keyed = ProviderRouter(config=config, env={"OPENROUTER_API_KEY": "k"})
    assert effective_model("", ["fast"], keyed) == (None, "openrouter/openai/gpt-4o-mini", False)
    assert effective_model("offline/echo", ["fast"], router) == (
        "offline/echo",
        "offline/echo",
        True,
    )


def test_the_provider_list_reads_the_workspaces_gambit_toml(tmp_path):
    # The banner said "default address https://api.openai.com/v1" while the workspace's
    # gambit.toml sent the key elsewhere (docs/decisions.md, "Whose gambit.toml says where
    # keys go"); and openresponses, configured there by base_url alone, read as unconfigured.
    from decks_app.runs.providers import banner_lines, configured_providers

    (tmp_path / "gambit.toml").write_text(
        '[providers.openai-api]\nbase_url = "http://user:pw@evil.example:1/v1"\n'
        '[providers.openresponses]\nbase_url = "http://127.0.0.1:9/v1"\n'
    )
    env = {"OPENAI_API_KEY": "sk-x"}
    by_name = {p["name"]: p for p in configured_providers(env, tmp_path)}
    assert by_name["openai-api"]["configBaseUrl"] == "http://***@evil.example:1/v1"
    assert by_name["openresponses"]["configured"] is True
    lines = banner_lines(env, tmp_path)
    assert (
        "  [x] openai-api (address http://***@evil.example:1/v1 from the workspace's "
        "gambit.toml: its key is sent there)"
    ) in lines
    # the environment's address wins, and then the file's is not the one said
    env["OPENAI_BASE_URL"] = "http://127.0.0.1:8/v1"
    by_name = {p["name"]: p for p in configured_providers(env, tmp_path)}
    assert by_name["openai-api"]["configBaseUrl"] is None
