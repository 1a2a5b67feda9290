//! The ingress rate-limit policy (rpc.md §6) for tycho-network's public overlay.
//!
//! Classification follows §6.2: whitelisted IPs bypass; known queries are light or heavy; broadcasts are
//! messages framed as `broadcastPrefix ‖ broadcast.message`; anything else is dropped without consuming
//! tokens. The limiter engine is tycho-util's `RateLimiter` keyed by remote IP (§6.3). The policy runs the
//! engine itself and hands the overlay `Bypass` (allowed) or `Drop` (rejected), so that every rejection can
//! be counted in metrics; the semantics are the engine's, unchanged.

use std::collections::HashSet;
use std::net::IpAddr;

use tycho_network::{
    OverlayIngressPolicyDecision, PublicOverlayRateLimitPolicy, PublicOverlayRateLimiter,
    ServiceRequest,
};
use tycho_util::rate_limit::{RateLimitPolicy, RateLimitVerdict, RateLimiter};

use crate::config::RateLimitsConfig;
use crate::proto::{ids, Method};

/// The traffic class of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrafficClass {
    /// Cheap queries.
    Light,
    /// Expensive queries.
    Heavy,
    /// External-message broadcasts.
    Broadcasts,
}

impl TrafficClass {
    fn name(self) -> &'static str {
        match self {
            Self::Light => "light",
            Self::Heavy => "heavy",
            Self::Broadcasts => "broadcasts",
        }
    }
}

/// What §6.2 decides before the limiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Classification {
    /// Whitelisted.
    Bypass,
    /// Charged to a class.
    Class(TrafficClass),
    /// Dropped without consuming tokens.
    Drop,
}

/// Classifies a query body (§6.2).
pub fn classify_query(body: &[u8]) -> Option<TrafficClass> {
    let method = Method::of_body(body)?;
    Some(if method.is_heavy() {
        TrafficClass::Heavy
    } else {
        TrafficClass::Light
    })
}

/// Classifies a message body (§6.2).
pub fn classify_message(body: &[u8]) -> Option<TrafficClass> {
    (body.len() >= 8
        && body[..4] == ids::BROADCAST_PREFIX.to_le_bytes()
        && body[4..8] == ids::BROADCAST_MESSAGE.to_le_bytes())
    .then_some(TrafficClass::Broadcasts)
}

/// Our ingress policy with its limiter state.
pub struct RpcRateLimitPolicy {
    config: RateLimitsConfig,
    whitelist: HashSet<IpAddr>,
    limiter: RateLimiter<IpAddr, TrafficClass>,
}

impl RpcRateLimitPolicy {
    /// A policy from the `rate_limits` section.
    pub fn new(config: RateLimitsConfig) -> Self {
        Self {
            whitelist: config.whitelist.iter().copied().collect(),
            limiter: RateLimiter::new(config.limiter.clone()),
            config,
        }
    }

    /// The overlay limiter for `rate_limits`; `None` (no limiter at all) for `null`.
    pub fn overlay_limiter(config: Option<&RateLimitsConfig>) -> Option<PublicOverlayRateLimiter> {
        config.map(|c| PublicOverlayRateLimiter::new(c.limiter.clone(), Self::new(c.clone())))
    }

    fn classify(&self, ip: IpAddr, class: Option<TrafficClass>) -> Classification {
        if self.whitelist.contains(&ip) {
            return Classification::Bypass;
        }
        match class {
            Some(class) => Classification::Class(class),
            None => Classification::Drop,
        }
    }

    /// Decides one request from `ip`; `true` = serve it.
    pub fn check(&self, ip: IpAddr, class: Option<TrafficClass>) -> bool {
        match self.classify(ip, class) {
            Classification::Bypass => true,
            Classification::Drop => {
                metrics::counter!("regolith_rpc_rate_limit_drops_total", "class" => "unknown")
                    .increment(1);
                false
            }
            Classification::Class(class) => {
                let limit = match class {
                    TrafficClass::Light => self.config.traffic.light_queries,
                    TrafficClass::Heavy => self.config.traffic.heavy_queries,
                    TrafficClass::Broadcasts => self.config.traffic.broadcasts,
                };
                match self.limiter.check(&ip, RateLimitPolicy { class, limit }) {
                    RateLimitVerdict::Allow => true,
                    RateLimitVerdict::Reject { retry_after } => {
                        metrics::counter!("regolith_rpc_rate_limit_drops_total", "class" => class.name())
                            .increment(1);
                        tracing::debug!(%ip, class = class.name(), ?retry_after, "request rate-limited");
                        false
                    }
                }
            }
        }
    }

    fn decide(
        &self,
        ip: IpAddr,
        class: Option<TrafficClass>,
    ) -> OverlayIngressPolicyDecision<TrafficClass> {
        if self.check(ip, class) {
            OverlayIngressPolicyDecision::Bypass
        } else {
            OverlayIngressPolicyDecision::Drop
        }
    }
}

impl PublicOverlayRateLimitPolicy for RpcRateLimitPolicy {
    type Class = TrafficClass;

    fn classify_query(&self, req: &ServiceRequest) -> OverlayIngressPolicyDecision<TrafficClass> {
        self.decide(req.metadata.remote_address.ip(), classify_query(&req.body))
    }

    fn classify_message(&self, req: &ServiceRequest) -> OverlayIngressPolicyDecision<TrafficClass> {
        self.decide(
            req.metadata.remote_address.ip(),
            classify_message(&req.body),
        )
    }
}
