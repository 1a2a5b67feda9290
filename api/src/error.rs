//! The protocol's errors (api.md §2): one code and one message each, shared by JSON-RPC and protobuf.

use std::borrow::Cow;

use crate::backend::BackendError;

/// -32700: the body is unreadable, or not JSON.
pub(crate) const PARSE_ERROR: i32 = -32700;
/// -32600: wrong shape, missing field, non-integer id, wrong version.
pub(crate) const INVALID_REQUEST: i32 = -32600;
/// -32601: unknown method.
pub(crate) const METHOD_NOT_FOUND: i32 = -32601;
/// -32602: a parameter fails to parse.
pub(crate) const INVALID_PARAMS: i32 = -32602;
/// -32000: internal error.
pub(crate) const INTERNAL_ERROR: i32 = -32000;
/// -32001: not ready.
pub(crate) const NOT_READY: i32 = -32001;
/// -32002: method not supported.
pub(crate) const NOT_SUPPORTED: i32 = -32002;
/// -32003: sendMessage rejected.
pub(crate) const INVALID_MESSAGE: i32 = -32003;
/// -32004: limit is too large.
pub(crate) const TOO_LARGE_LIMIT: i32 = -32004;
/// -32006: the response could not be serialised.
pub(crate) const BAD_RESPONSE: i32 = -32006;

/// Every code of api.md §2.
pub(crate) const ALL_CODES: [i32; 10] = [
    PARSE_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    INVALID_PARAMS,
    INTERNAL_ERROR,
    NOT_READY,
    NOT_SUPPORTED,
    INVALID_MESSAGE,
    TOO_LARGE_LIMIT,
    BAD_RESPONSE,
];

/// An error answer: a code of api.md §2 and its message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    /// The JSON-RPC error code (also `rpc.Error.code` in protobuf).
    pub code: i32,
    /// The message the client sees.
    pub message: Cow<'static, str>,
}

impl ApiError {
    pub(crate) fn new(code: i32, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn parse(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(PARSE_ERROR, message)
    }

    pub(crate) fn invalid_request(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(INVALID_REQUEST, message)
    }

    pub(crate) fn unknown_method() -> Self {
        Self::new(METHOD_NOT_FOUND, "unknown method")
    }

    pub(crate) fn invalid_params(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    pub(crate) fn internal(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }

    pub(crate) fn not_ready() -> Self {
        Self::new(NOT_READY, "not ready")
    }

    pub(crate) fn not_supported() -> Self {
        Self::new(NOT_SUPPORTED, "method not supported")
    }

    pub(crate) fn invalid_message(message: &'static str) -> Self {
        Self::new(INVALID_MESSAGE, message)
    }

    pub(crate) fn limit_too_large() -> Self {
        Self::new(TOO_LARGE_LIMIT, "limit is too large")
    }

    pub(crate) fn bad_response(reason: impl std::fmt::Display) -> Self {
        Self::new(
            BAD_RESPONSE,
            format!("failed to serialize response: {reason}"),
        )
    }
}

impl From<BackendError> for ApiError {
    fn from(e: BackendError) -> Self {
        match e {
            BackendError::NotReady => Self::not_ready(),
            BackendError::NotSupported => Self::not_supported(),
            BackendError::Internal(text) => Self::internal(text),
        }
    }
}
