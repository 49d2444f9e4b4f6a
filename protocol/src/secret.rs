//! Secrets in URLs: the one redaction function every printed Redis (or judge) URL goes
//! through, and the placeholder password that deployments must replace.
//!
//! ```text
//!  redis://learner:s3cret@redis:6379/0   ──redact_url──►  redis://learner:***@redis:6379/0
//!  rediss://:s3cret@host?password=s3cret ──redact_url──►  rediss://:***@host?password=***
//!  http://judge:8000/v1                  ──redact_url──►  http://judge:8000/v1 (nothing to hide)
//! ```
//!
//! Display of every type that holds a URL ([`crate::link::RedisLink`], the Redis section of the
//! configuration, the errors naming an endpoint) prints the redacted form; only the code that
//! opens the connection sees the password.

/// The password shipped in example manifests; roles refuse it unless the deployment says it is
/// a throw-away test cluster (`redis.allow_placeholder_password = true`, the cpu-smoke overlay).
pub const PLACEHOLDER_PASSWORD: &str = "change-me";

/// What a hidden password is replaced by.
pub const MASK: &str = "***";

/// `url` with the password of its user-info part and any `password=` query value replaced by
/// `***`; the scheme, user name, host, port, path and other parameters are kept, so a log still
/// says which user reached which server. Text without `://` is returned unchanged.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    // The user-info ends at the URL's last '@': a password may hold '@', '/' or '?' that its
    // writer did not percent-encode, and hiding too much beats leaking.
    let (userinfo, after) = split_userinfo(rest);
    let end = after.find(['/', '?', '#']).unwrap_or(after.len());
    let (host, tail) = after.split_at(end);
    let userinfo = match userinfo {
        Some(info) => match info.split_once(':') {
            Some((user, _password)) => format!("{user}:{MASK}@"),
            None => format!("{info}@"),
        },
        None => String::new(),
    };
    format!("{scheme}://{userinfo}{host}{}", redact_query(tail))
}

/// `user:pw@host/0?x` → (`Some("user:pw")`, `host/0?x`).
fn split_userinfo(rest: &str) -> (Option<&str>, &str) {
    match rest.rfind('@') {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    }
}

/// `?a=1&password=x#f` → `?a=1&password=***#f`.
fn redact_query(tail: &str) -> String {
    let Some((path, query)) = tail.split_once('?') else {
        return tail.to_string();
    };
    let (query, fragment) = query.split_once('#').map_or((query, None), |(q, f)| (q, Some(f)));
    let params: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("password") || k.eq_ignore_ascii_case("pass") => {
                format!("{k}={MASK}")
            }
            _ => p.to_string(),
        })
        .collect();
    let fragment = fragment.map(|f| format!("#{f}")).unwrap_or_default();
    format!("{path}?{}{fragment}", params.join("&"))
}

/// `scheme://user:pw@host:port/db` → `host:port`: a server's address alone, for metric labels
/// and short log fields.
pub fn host_port(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let after = split_userinfo(rest).1;
    after[..after.find(['/', '?', '#']).unwrap_or(after.len())].to_string()
}

/// Whether `url` carries a password (in its user-info or a `password=` parameter).
pub fn has_password(url: &str) -> bool {
    redact_url(url) != url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked_and_everything_else_kept() {
        assert_eq!(redact_url("redis://:pw@h:1/0"), "redis://:***@h:1/0");
        assert_eq!(redact_url("redis://learner:p@w@h:1"), "redis://learner:***@h:1");
        assert_eq!(redact_url("rediss://u:p@h:6380/2?protocol=resp3"), "rediss://u:***@h:6380/2?protocol=resp3");
        assert_eq!(redact_url("redis://h:1/?password=pw&x=1#f"), "redis://h:1/?password=***&x=1#f");
        assert_eq!(redact_url("redis://user@h:1"), "redis://user@h:1");
        assert_eq!(redact_url("redis://u:p/w?@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact_url("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(redact_url("not a url"), "not a url");
    }

    #[test]
    fn host_port_is_the_address_alone() {
        assert_eq!(host_port("redis://:pw@h:1/0"), "h:1");
        assert_eq!(host_port("redis://user:p/w@h:1"), "h:1");
        assert_eq!(host_port("http://judge:8000/v1"), "judge:8000");
        assert_eq!(host_port("127.0.0.1:6379"), "127.0.0.1:6379");
    }

    #[test]
    fn has_password_sees_both_places() {
        assert!(has_password("redis://:pw@h"));
        assert!(has_password("redis://h/?password=x"));
        assert!(!has_password("redis://user@h:1"));
    }
}
