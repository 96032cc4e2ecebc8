import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import libllm  # noqa: E402


@pytest.fixture(scope="session")
def model_path():
    path = os.environ.get("LLM_MODEL_PATH")
    if not path:
        pytest.skip("LLM_MODEL_PATH is not set: no model to test with "
                    "(scripts/fetch_model.sh prints the default model's path)")
    return path


@pytest.fixture(scope="session")
def model(model_path):
    with libllm.Model(model_path) as m:
        yield m
