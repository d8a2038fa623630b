"""The models a `ScriptedProvider` answers with when its queue is empty are handed to it
(`models=`); the registry's `offline/` provider is handed the built-in demo models. (That the
offline modules import each other in layers, not in a circle, is an import-linter contract in
pyproject.toml.)"""

from __future__ import annotations

import pytest

from gambit.core.provider import ProviderError, output_text
from gambit.providers import ProviderRouter
from gambit.providers.offline import BUILTIN_MODELS, ScriptedProvider, Stream
from tests.providers.helpers import request


async def test_a_scripted_provider_answers_with_the_models_it_is_handed():
    provider = ScriptedProvider(models={"parrot": lambda req: Stream("squawk squawk")})
    result = await provider.responses(request("offline/parrot"))
    assert output_text(result.response) == "squawk squawk"
    with pytest.raises(
        ProviderError, match=r"the offline models are offline/parrot$"
    ):  # the hint names them
        await provider.responses(request("offline/echo"))  # not handed: not known


async def test_the_registry_hands_its_offline_provider_the_demo_models():
    router = ProviderRouter(env={})
    provider = router.provider("offline")
    assert isinstance(provider, ScriptedProvider)
    assert provider.models == dict(BUILTIN_MODELS)
    result = await router.responses(request("offline/echo", "ping"))
    assert output_text(result.response) == "You said: ping"
