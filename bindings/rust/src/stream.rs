//! `TokenStream`: generated tokens as an iterator (blocking `next`) or by
//! polling (`try_next`, never blocks), on the library's async steps.
use std::ptr;

use crate::error::{check, Result};
use crate::session::Session;
use crate::Token;
use llm_sys as sys;

/// What [`TokenStream::try_next`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TryNext {
    /// The next token.
    Token(Token),
    /// A step is still running: ask again later (e.g. next frame).
    Pending,
    /// The stream has ended (max tokens, end of generation, or an error
    /// already returned).
    Finished,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The prompt is not submitted yet.
    Start,
    /// A prefill step is in flight (submitted with prefill_async).
    Prefilling,
    /// Logits are ready; no step in flight.
    Idle,
    /// A decode step is in flight (submitted with decode_async).
    Decoding,
    Finished,
}

/// Generated tokens of one session; see [`Session::stream`]. Dropping a
/// stream with a step in flight cancels that step and collects it, so the
/// session is free again (and as it was before that step).
pub struct TokenStream<'s> {
    session: &'s mut Session,
    prompt: Vec<Token>,
    remaining: usize,
    state: State,
}

impl<'s> TokenStream<'s> {
    pub(crate) fn new(session: &'s mut Session, prompt: &[Token], max_tokens: usize) -> Self {
        TokenStream {
            session,
            prompt: prompt.to_vec(),
            remaining: max_tokens,
            state: State::Start,
        }
    }

    /// Ends the stream on an error (the session is as before the failed step).
    fn fail<T>(&mut self, result: Result<T>) -> Result<T> {
        if result.is_err() {
            self.state = State::Finished;
        }
        result
    }

    /// A decode step's token: the stream's next token, or its end.
    fn take_token(&mut self, token: Token) -> Result<Option<Token>> {
        self.remaining -= 1;
        if self.fail(self.session.is_eog(token))? {
            self.state = State::Finished;
            return Ok(None);
        }
        self.state = if self.remaining == 0 {
            State::Finished
        } else {
            State::Idle
        };
        Ok(Some(token))
    }

    /// Never blocks: submits the next step when none is in flight and
    /// reports whether a token is ready. Meant to be called once per frame.
    pub fn try_next(&mut self) -> Result<TryNext> {
        loop {
            match self.state {
                State::Finished => return Ok(TryNext::Finished),
                State::Start if self.prompt.is_empty() => self.state = State::Idle,
                State::Start => {
                    let raw = self.session.raw();
                    // Safety: the library copies the tokens.
                    let r = check(unsafe {
                        sys::llm_session_prefill_async(raw, self.prompt.as_ptr(), self.prompt.len())
                    });
                    self.fail(r)?;
                    self.state = State::Prefilling;
                }
                State::Idle if self.remaining == 0 => self.state = State::Finished,
                State::Idle => {
                    // Safety: handle only.
                    let r = check(unsafe { sys::llm_session_decode_async(self.session.raw()) });
                    self.fail(r)?;
                    self.state = State::Decoding;
                }
                State::Prefilling | State::Decoding => {
                    let mut done = 0i32;
                    let mut token: Token = -1;
                    // Safety: valid out-parameters.
                    let r = check(unsafe {
                        sys::llm_session_poll(self.session.raw(), &mut done, &mut token)
                    });
                    self.fail(r)?;
                    if done == 0 {
                        return Ok(TryNext::Pending);
                    }
                    if self.state == State::Prefilling {
                        self.state = State::Idle;
                    } else {
                        return Ok(match self.take_token(token)? {
                            Some(t) => TryNext::Token(t),
                            None => TryNext::Finished,
                        });
                    }
                }
            }
        }
    }

    /// Blocks until the next token (None at the end).
    fn next_blocking(&mut self) -> Result<Option<Token>> {
        loop {
            match self.state {
                State::Finished => return Ok(None),
                State::Start => {
                    if !self.prompt.is_empty() {
                        let prompt = std::mem::take(&mut self.prompt);
                        let r = self.session.prefill(&prompt);
                        self.fail(r)?;
                    }
                    self.state = State::Idle;
                }
                State::Prefilling => {
                    // Safety: collects our step.
                    let r = check(unsafe {
                        sys::llm_session_wait(self.session.raw(), ptr::null_mut())
                    });
                    self.fail(r)?;
                    self.state = State::Idle;
                }
                State::Idle if self.remaining == 0 => self.state = State::Finished,
                State::Idle => {
                    let r = self.session.decode();
                    let token = self.fail(r)?;
                    return self.take_token(token);
                }
                State::Decoding => {
                    let mut token: Token = -1;
                    // Safety: collects our step.
                    let r = check(unsafe { sys::llm_session_wait(self.session.raw(), &mut token) });
                    self.fail(r)?;
                    return self.take_token(token);
                }
            }
        }
    }
}

impl Iterator for TokenStream<'_> {
    type Item = Result<Token>;

    fn next(&mut self) -> Option<Result<Token>> {
        self.next_blocking().transpose()
    }
}

impl Drop for TokenStream<'_> {
    fn drop(&mut self) {
        if matches!(self.state, State::Prefilling | State::Decoding) {
            let raw = self.session.raw();
            // Safety: handle only; the wait collects the cancelled step (and
            // clears the cancel latch it set), leaving the session free.
            unsafe {
                sys::llm_session_cancel(raw);
                sys::llm_session_wait(raw, ptr::null_mut());
            }
        }
    }
}
