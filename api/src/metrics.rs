//! The API's metrics: per method and protocol, requests, errors (by code) and latency; requests refused before
//! any method (rate limit, content type).

use std::time::Duration;

use crate::methods::Method;

/// Requests, by `method` and `protocol` (`jrpc`, `proto`).
pub(crate) const REQUESTS: &str = "regolith_api_requests_total";
/// Error answers, by `method` and `protocol`.
pub(crate) const ERRORS: &str = "regolith_api_errors_total";
/// Error answers, by `code` (api.md §2).
pub(crate) const ERROR_CODES: &str = "regolith_api_error_codes_total";
/// Seconds from a parsed request to its answer, by `method` and `protocol`.
pub(crate) const LATENCY: &str = "regolith_api_request_duration_seconds";
/// Requests refused by the per-IP rate limit (HTTP 429).
pub(crate) const RATE_LIMITED: &str = "regolith_api_rate_limited_total";
/// POST requests of another content type (HTTP 415).
pub(crate) const UNSUPPORTED_MEDIA: &str = "regolith_api_unsupported_media_type_total";

/// The `method` label of a request that never named a known method (bad envelope, unknown method).
pub(crate) const NO_METHOD: &str = "none";

/// The protocols of the labels.
pub(crate) const PROTOCOLS: [&str; 2] = ["jrpc", "proto"];

/// Describes every metric of the API and registers each series at 0, so that a scrape lists them from the
/// start. Call once, after the metrics recorder is installed.
pub fn register_metrics() {
    metrics::describe_counter!(REQUESTS, "API requests, by method and protocol");
    metrics::describe_counter!(ERRORS, "API error answers, by method and protocol");
    metrics::describe_counter!(ERROR_CODES, "API error answers, by error code");
    metrics::describe_histogram!(
        LATENCY,
        metrics::Unit::Seconds,
        "API request handling time, by method and protocol"
    );
    metrics::describe_counter!(
        RATE_LIMITED,
        "API requests refused by the per-IP rate limit"
    );
    metrics::describe_counter!(
        UNSUPPORTED_MEDIA,
        "API POST requests of an unsupported content type"
    );
    for protocol in PROTOCOLS {
        let names = Method::ALL.iter().map(|m| m.name()).chain([NO_METHOD]);
        for method in names {
            metrics::counter!(REQUESTS, "method" => method, "protocol" => protocol).absolute(0);
            metrics::counter!(ERRORS, "method" => method, "protocol" => protocol).absolute(0);
            // A histogram has no zero value; touching it registers the series.
            let _ = metrics::histogram!(LATENCY, "method" => method, "protocol" => protocol);
        }
    }
    for code in crate::error::ALL_CODES {
        metrics::counter!(ERROR_CODES, "code" => code.to_string()).absolute(0);
    }
    metrics::counter!(RATE_LIMITED).absolute(0);
    metrics::counter!(UNSUPPORTED_MEDIA).absolute(0);
    // The transactions index (`crate::index`), fed by the node's indexing task.
    metrics::gauge!("regolith_api_index_last_mc_seqno").set(0.0);
    metrics::counter!("regolith_api_index_transactions_total").absolute(0);
    metrics::counter!("regolith_api_index_failures_total").absolute(0);
    metrics::counter!("regolith_api_index_skipped_groups_total").absolute(0);
    metrics::counter!("regolith_api_index_gc_removed_total").absolute(0);
}

/// Records one answered request.
pub(crate) fn record(
    protocol: &'static str,
    method: &'static str,
    error_code: Option<i32>,
    elapsed: Duration,
) {
    metrics::counter!(REQUESTS, "method" => method, "protocol" => protocol).increment(1);
    metrics::histogram!(LATENCY, "method" => method, "protocol" => protocol)
        .record(elapsed.as_secs_f64());
    if let Some(code) = error_code {
        metrics::counter!(ERRORS, "method" => method, "protocol" => protocol).increment(1);
        metrics::counter!(ERROR_CODES, "code" => code.to_string()).increment(1);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use metrics::{
        Counter, CounterFn, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
        SharedString, Unit,
    };

    use super::*;

    /// Every series by its name and sorted labels: counters' values, histograms' sample counts.
    #[derive(Default)]
    struct Capture {
        series: Mutex<BTreeMap<String, Arc<Series>>>,
    }

    #[derive(Default)]
    struct Series(AtomicU64);

    impl CounterFn for Series {
        fn increment(&self, value: u64) {
            self.0.fetch_add(value, Ordering::Relaxed);
        }
        fn absolute(&self, value: u64) {
            self.0.store(value, Ordering::Relaxed);
        }
    }

    impl HistogramFn for Series {
        fn record(&self, _value: f64) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    impl Capture {
        fn series(&self, key: &Key) -> Arc<Series> {
            let mut labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            let name = format!("{}{{{}}}", key.name(), labels.join(","));
            self.series.lock().unwrap().entry(name).or_default().clone()
        }

        fn value(&self, name: &str) -> Option<u64> {
            let series = self.series.lock().unwrap();
            series.get(name).map(|s| s.0.load(Ordering::Relaxed))
        }
    }

    impl Recorder for Capture {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            Counter::from_arc(self.series(key))
        }
        fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::noop()
        }
        fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::from_arc(self.series(key))
        }
    }

    #[test]
    fn every_series_is_registered_at_zero_and_answers_are_counted() {
        let capture = Capture::default();
        metrics::with_local_recorder(&capture, || {
            register_metrics();
            record("jrpc", "getStatus", None, Duration::from_millis(1));
            record(
                "proto",
                "getContractState",
                Some(-32602),
                Duration::from_millis(2),
            );
        });
        let requests = |method: &str, protocol: &str| {
            capture.value(&format!(
                "{REQUESTS}{{method={method},protocol={protocol}}}"
            ))
        };
        let errors = |method: &str, protocol: &str| {
            capture.value(&format!("{ERRORS}{{method={method},protocol={protocol}}}"))
        };
        assert_eq!(requests("getStatus", "jrpc"), Some(1));
        assert_eq!(requests("getContractState", "proto"), Some(1));
        assert_eq!(requests("getTransactionBlockId", "proto"), Some(0));
        assert_eq!(requests(NO_METHOD, "jrpc"), Some(0));
        assert_eq!(errors("getContractState", "proto"), Some(1));
        assert_eq!(errors("getStatus", "jrpc"), Some(0));
        assert_eq!(
            capture.value(&format!("{ERROR_CODES}{{code=-32602}}")),
            Some(1)
        );
        assert_eq!(
            capture.value(&format!("{ERROR_CODES}{{code=-32004}}")),
            Some(0)
        );
        assert_eq!(
            capture.value(&format!("{LATENCY}{{method=getStatus,protocol=jrpc}}")),
            Some(1)
        );
        assert_eq!(capture.value(&format!("{RATE_LIMITED}{{}}")), Some(0));
        assert_eq!(capture.value(&format!("{UNSUPPORTED_MEDIA}{{}}")), Some(0));
    }
}
