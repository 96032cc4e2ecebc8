"""Tests of the Python binding against the real library and the default model."""

import ctypes
import threading

import pytest

import libllm
from libllm import _native as N

PROMPT = "The old lighthouse keeper looked at the sea and said"


# ---- no model needed -------------------------------------------------------

def test_version_is_accepted_and_others_refused():
    major, minor = (int(x) for x in libllm.version().split(".")[:2])
    assert (major, minor) == N.WRITTEN_FOR
    libllm.check_version("0.3.7", (0, 3))
    for bad in ("0.4.0", "0.2.9", "1.3.0", "garbage"):
        with pytest.raises(libllm.LlmVersionError) as e:
            libllm.check_version(bad, (0, 3))
        assert "0.3" in str(e.value)
    libllm.check_version("1.5.0", (1, 3))  # from 1.0: later minors only add
    with pytest.raises(libllm.LlmVersionError):
        libllm.check_version("2.0.0", (1, 3))


def test_struct_sizes_match_the_abi_table():
    # docs/ABI.md, "Historical sizes", column 0.3 (LP64).
    expected = {N.ModelParams: 56, N.ModelInfo: 248, N.KvStats: 168, N.BatchStats: 72,
                N.SamplerParams: 36, N.SamplerExt: 8, N.SessionParams: 72,
                N.SessionStats: 32, N.GenerateParams: 40, N.GenerateResult: 32,
                N.ChatMessage: 16}
    for struct, size in expected.items():
        assert ctypes.sizeof(struct) == size, struct.__name__


def test_missing_file_is_an_io_error_with_a_message():
    with pytest.raises(libllm.LlmError) as e:
        libllm.Model("/nonexistent/model.gguf")
    assert e.value.status == libllm.ERR_IO
    assert e.value.status_name == "LLM_ERR_IO"
    assert "/nonexistent/model.gguf" in e.value.message


# ---- with the default model --------------------------------------------------

def test_model_info_and_tokenizer(model):
    info = model.info()
    assert info["architecture"] == "llama"
    assert info["n_vocab"] > 1000
    # The struct's last fields arrive (the load memory report).
    assert info["mapped_weight_bytes"] > 0
    assert info["weight_copy_bytes"] > 0
    tokens = model.tokenize("Hello, world!")
    assert len(tokens) >= 3
    assert model.detokenize(tokens) == "Hello, world!"
    assert b"".join(model.token_bytes(t) for t in tokens) == b"Hello, world!"
    assert model.is_eog(info["eos_token"])


def test_greedy_tokens_are_the_argmax_of_the_logits(model):
    with model.session(temperature=0.0) as s:
        s.prefill(PROMPT)
        for _ in range(8):
            logits = s.logits()
            best = max(range(len(logits)), key=logits.__getitem__)
            assert s.decode() == best


def test_stream_and_generate_give_the_same_greedy_text(model):
    with model.session(temperature=0.0) as a, model.session(temperature=0.0) as b:
        streamed = "".join(a.stream(PROMPT, max_tokens=24))
        pieces = []
        gen = b.generate(PROMPT, max_tokens=24, on_piece=pieces.append)
        assert streamed and streamed == gen.text == "".join(pieces)
        assert gen.n_generated >= 1
        assert a.n_tokens == b.n_tokens


def test_two_sessions_on_two_threads_and_a_cancel_from_a_third(model_path):
    # Deterministic kernels: B's tokens must not depend on A running beside it.
    with libllm.Model(model_path, deterministic=True) as model:
        def forty_greedy_ids(session):
            session.prefill("Tell me about dragons.")
            return [session.decode() for _ in range(40)]

        with model.session(temperature=0.0) as solo:
            expected_b = forty_greedy_ids(solo)
        a = model.session(temperature=0.0)
        b = model.session(temperature=0.0)
        a.prefill("Write a very long story about a cat.")
        a_tokens_before = a.n_tokens
        a_decoded = []
        start = threading.Barrier(2)
        b_done = threading.Event()
        results = {}

        def run_a():
            # A loop of blocking decodes (an end-of-generation token does not
            # stop it): the cancel lands on one of them.
            start.wait()
            try:
                for _ in range(400):
                    a_decoded.append(a.decode())
                results["a"] = "finished"
            except libllm.LlmError as e:
                results["a"] = e

        def run_b():
            start.wait()
            try:
                results["b"] = forty_greedy_ids(b)
            finally:
                b_done.set()

        def cancel_a():  # once B is done, so that A and B surely overlapped
            b_done.wait(120)
            a.cancel()

        threads = [threading.Thread(target=f) for f in (run_a, run_b, cancel_a)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert isinstance(results["a"], libllm.LlmError), results["a"]
        assert results["a"].status == libllm.ERR_CANCELLED
        # The cancelled decode changed nothing: only the successful ones count.
        assert a.n_tokens == a_tokens_before + len(a_decoded)
        assert a.decode() >= 0  # and the session is still usable
        assert results["b"] == expected_b
        assert model.batch_stats()["max_sessions_in_pass"] >= 2
        a.close()
        b.close()


def test_use_after_close_is_a_clean_error(model_path):
    model = libllm.Model(model_path)
    session = model.session(temperature=0.0)
    stale = session.handle
    session.close()
    session.close()  # twice: a no-op
    with pytest.raises(libllm.LlmError) as e:
        session.decode()
    assert e.value.status == libllm.ERR_INVALID_ARGUMENT
    # The library's own check: a freed handle passed straight to C is refused.
    lib = libllm.library()
    out = N.llm_token()
    assert lib.llm_session_decode(stale, ctypes.byref(out)) == libllm.ERR_INVALID_ARGUMENT
    assert b"session" in ctypes.string_at(lib.llm_last_error())
    # A session outlives the model object that created it.
    with model.session(temperature=0.0) as s2:
        model.close()
        with pytest.raises(libllm.LlmError):
            model.tokenize("x")
        s2.prefill([1, 2, 3])
        assert s2.decode() >= 0


def test_close_from_another_thread_stops_a_generation(model):
    s = model.session(temperature=0.0)
    started = threading.Event()
    out = {}

    def gen():
        out["g"] = s.generate(PROMPT, max_tokens=400, on_piece=lambda _p: started.set())

    t = threading.Thread(target=gen)
    t.start()
    assert started.wait(60)
    s.close()
    t.join(60)
    assert not t.is_alive()
    assert out["g"].stop_reason == libllm.STOP_CALLBACK


def test_bad_inputs_raise_with_status_and_message(model):
    with model.session() as s:
        with pytest.raises(libllm.LlmError) as e:
            s.decode()  # no logits yet
        assert e.value.status == libllm.ERR_INVALID_ARGUMENT and e.value.message
        with pytest.raises(libllm.LlmError) as e:
            s.prefill([model.info()["n_vocab"] + 5])
        assert e.value.status == libllm.ERR_INVALID_ARGUMENT
        with pytest.raises(libllm.LlmError) as e:
            s.generate("hi", max_tokens=0)
        assert e.value.status == libllm.ERR_INVALID_ARGUMENT
        with pytest.raises(libllm.LlmError) as e:
            s.load(b"not a saved session")
        assert e.value.status in (libllm.ERR_INVALID_ARGUMENT, libllm.ERR_UNSUPPORTED)
        with pytest.raises(libllm.LlmError) as e:
            s.poll()  # nothing submitted
        assert e.value.status == libllm.ERR_INVALID_ARGUMENT
        s.prefill_async("Hello")
        with pytest.raises(libllm.LlmError) as e:
            s.decode()  # the async step is not collected yet
        assert e.value.status == libllm.ERR_BUSY
        assert s.wait() is None
        assert s.decode() >= 0
    with pytest.raises(TypeError):
        model.session(temprature=0.5)


def test_exception_in_a_callback_stops_and_propagates(model):
    class Boom(Exception):
        pass

    def explode(_piece):
        raise Boom()

    with model.session(temperature=0.0) as s:
        with pytest.raises(Boom):
            s.generate(PROMPT, max_tokens=50, on_piece=explode)


def test_forks_share_kv_and_poll_never_blocks(model):
    with model.session(temperature=0.0) as base:
        base.prefill("You are in a village. " * 20)
        forks = [base.fork() for _ in range(3)]
        assert model.kv_stats()["blocks_shared"] > 0
        assert model.kv_stats()["n_pools"] == 1  # no sliding window: one pool
        expected = base.decode()
        for f in forks:
            f.decode_async()
        got = []
        while len(got) < len(forks):
            for f in forks:
                if f not in [g[0] for g in got]:
                    done, token = f.poll()
                    if done:
                        got.append((f, token))
        assert [t for _, t in got] == [expected] * 3
        for f in forks:
            f.close()


def test_save_and_load_round_trip(model):
    with model.session(temperature=0.0) as a, model.session(temperature=0.0) as b:
        a.prefill(PROMPT)
        b.load(a.save())
        assert b.n_tokens == a.n_tokens
        assert [b.decode() for _ in range(4)] == [a.decode() for _ in range(4)]


def test_log_callback_receives_the_load_message(model_path):
    messages = []
    libllm.set_log_callback(lambda level, text: messages.append((level, text)), libllm.LOG_INFO)
    try:
        libllm.Model(model_path).close()
    finally:
        libllm.set_log_callback(None)
    assert any(level == libllm.LOG_INFO and "loaded" in text for level, text in messages)
    count = len(messages)
    libllm.Model(model_path).close()
    assert len(messages) == count  # the sink is gone


def test_stop_strings_reach_the_library(model):
    with model.session(temperature=0.0) as s:
        full = s.generate(PROMPT, max_tokens=24).text
    words = full.split()
    assert len(words) >= 4, full
    stop = words[len(words) // 2]
    with model.session(temperature=0.0) as s:
        gen = s.generate(PROMPT, max_tokens=24, stop=["never appears 1234", stop])
    assert gen.stop_reason == libllm.STOP_STRING
    assert gen.text == full[:full.index(stop)]
