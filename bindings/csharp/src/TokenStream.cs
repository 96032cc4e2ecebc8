using System;

namespace LibLlm
{
    /// <summary>A generation driven from a frame loop: TryPoll never blocks
    /// (it polls the session's submitted step and, when it ended, submits the
    /// next one). The model's batcher runs the steps of every session beside
    /// each other. No callback is involved: everything happens on the thread
    /// that calls TryPoll.</summary>
    public sealed class TokenStream : IDisposable
    {
        private readonly Session _session;
        private readonly PieceDecoder _decoder;
        private readonly int _maxTokens;
        private bool _prefilling = true;
        private bool _pending;

        internal TokenStream(Session session, int[] prompt, int maxTokens)
        {
            if (maxTokens <= 0) throw new ArgumentOutOfRangeException("maxTokens");
            _session = session;
            _maxTokens = maxTokens;
            _decoder = new PieceDecoder(session.Model);
            if (prompt != null && prompt.Length > 0)
            {
                session.PrefillAsync(prompt);
            }
            else
            {
                _prefilling = false;
                session.DecodeAsync();
            }
            _pending = true;
        }

        /// <summary>Tokens generated so far (the end-of-generation token excluded).</summary>
        public int TokenCount { get; private set; }

        public bool IsFinished { get; private set; }

        /// <summary>Why it finished: EndOfGeneration or MaxTokens.</summary>
        public StopReason StopReason { get; private set; }

        /// <summary>Non-blocking. Returns true with the text produced since the
        /// last call when there is some; false while the step runs, when a
        /// token completed no character yet, or once finished. A failed step
        /// (e.g. Cancel) throws LlmException and finishes the stream.</summary>
        public bool TryPoll(out string text)
        {
            text = null;
            if (IsFinished) return false;
            int token;
            bool done;
            try
            {
                done = _session.Poll(out token);
            }
            catch (LlmException)
            {
                _pending = false;
                IsFinished = true;
                throw;
            }
            if (!done) return false;
            _pending = false;
            if (_prefilling)
            {
                _prefilling = false;
                Submit();
                return false;
            }
            if (_session.Model.IsEndOfGeneration(token))
            {
                Finish(StopReason.EndOfGeneration, out text);
                return text.Length > 0;
            }
            TokenCount++;
            text = _decoder.Add(token);
            if (TokenCount >= _maxTokens)
            {
                string tail;
                Finish(StopReason.MaxTokens, out tail);
                text += tail;
            }
            else
            {
                Submit();
            }
            return text.Length > 0;
        }

        private void Submit()
        {
            _session.DecodeAsync();
            _pending = true;
        }

        private void Finish(StopReason reason, out string tail)
        {
            IsFinished = true;
            StopReason = reason;
            tail = _decoder.Flush();
        }

        /// <summary>Stops a running stream: cancels and collects its step, so
        /// the session is free (and unchanged by that step) afterwards.</summary>
        public void Dispose()
        {
            if (!_pending || _session.IsDisposed) return;
            _pending = false;
            IsFinished = true;
            _session.Cancel();
            try { _session.Wait(); }
            catch (LlmException e) { if (e.Status != LlmStatus.Cancelled) throw; }
        }
    }
}
