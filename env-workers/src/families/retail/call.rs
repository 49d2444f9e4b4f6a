//! Tool calls parsed into a typed [`Call`]: arguments by key or position, values normalised
//! (order ids without `#` and uppercase, names and emails lowercase, addresses canonical) so that
//! equal calls compare equal — which is what the verifier's redundancy rule relies on.

use super::db::{canon_address, norm_order_id};
use crate::action::{arg, parse_args, ToolCall};

/// The tool names, as the system prompt lists them.
pub const TOOLS: [&str; 8] = [
    "find_user",
    "get_user",
    "list_orders",
    "get_order",
    "cancel_order",
    "refund",
    "update_address",
    "transfer_to_human",
];

const ANY: usize = usize::MAX;

/// A parsed, normalised tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// Identify the customer by email, or by name and zip (lowercase, spaces collapsed).
    FindUser {
        /// Email, lowercase.
        email: Option<String>,
        /// Full name, lowercase.
        name: Option<String>,
        /// Zip code.
        zip: Option<String>,
    },
    /// The customer's profile.
    GetUser(String),
    /// The customer's orders.
    ListOrders(String),
    /// One order in full.
    GetOrder(String),
    /// Cancel a pending order.
    Cancel {
        /// Order id, normalised.
        order: String,
        /// Reason, lowercase.
        reason: String,
    },
    /// Refund part of a delivered order.
    Refund {
        /// Order id, normalised.
        order: String,
        /// The amount as written.
        amount: String,
    },
    /// Change a default address (`user`) or a pending order's shipping address (`order`).
    Readdress {
        /// The order, when re-addressing an order.
        order: Option<String>,
        /// The user, when changing the default address.
        user: Option<String>,
        /// The new address, canonical.
        address: String,
    },
    /// Hand the conversation to a human; ends the episode.
    Transfer(String),
}

/// Why a tool call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrKind {
    /// No such tool.
    Unknown,
    /// Arguments that do not parse (a protocol error).
    Malformed,
    /// Missing or invalid arguments, or a record that does not exist or is not the customer's.
    BadArgs,
    /// No customer identified yet.
    NotIdentified,
    /// The store's policy refuses it (wrong status, too large a refund).
    Refused,
}

/// A failed call: what kind, and the text the agent sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    /// What kind.
    pub kind: ErrKind,
    /// The message.
    pub text: String,
}

/// A [`ToolError`] of `kind`.
pub fn err(kind: ErrKind, text: impl Into<String>) -> ToolError {
    ToolError { kind, text: text.into() }
}

fn is_order_id(v: &str) -> bool {
    let id = norm_order_id(v);
    id.len() > 1 && id.starts_with('W') && id[1..].bytes().all(|b| b.is_ascii_digit())
}

/// Lowercase with single spaces.
pub fn lower(v: &str) -> String {
    v.split_whitespace().collect::<Vec<_>>().join(" ").to_lowercase()
}

/// Parses a call of one of [`TOOLS`].
pub fn parse_call(call: &ToolCall) -> Result<Call, ToolError> {
    if !TOOLS.contains(&call.name.as_str()) {
        return Err(err(ErrKind::Unknown, format!("unknown tool `{}`; the tools are {}", call.name, TOOLS.join(", "))));
    }
    let args = parse_args(&call.raw_args).map_err(|e| err(ErrKind::Malformed, e.to_string()))?;
    let need = |key: &str, pos: usize| {
        arg(&args, key, pos)
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| err(ErrKind::BadArgs, format!("{} needs {key}", call.name)))
    };
    Ok(match call.name.as_str() {
        "find_user" => {
            let first = arg(&args, "name", 0).filter(|v| !v.contains('@'));
            let email = arg(&args, "email", ANY).or_else(|| arg(&args, "name", 0).filter(|v| v.contains('@')));
            let zip = arg(&args, "zip", if first.is_some() { 1 } else { ANY });
            if email.is_none() && (first.is_none() || zip.is_none()) {
                return Err(err(ErrKind::BadArgs, "find_user needs email=..., or name=... and zip=..."));
            }
            Call::FindUser { email: email.map(lower), name: first.map(lower), zip: zip.map(|z| z.trim().to_string()) }
        }
        "get_user" => Call::GetUser(lower(need("user_id", 0)?)),
        "list_orders" => Call::ListOrders(lower(need("user_id", 0)?)),
        "get_order" => Call::GetOrder(norm_order_id(need("order_id", 0)?)),
        "cancel_order" => {
            Call::Cancel { order: norm_order_id(need("order_id", 0)?), reason: lower(need("reason", 1)?) }
        }
        "refund" => {
            Call::Refund { order: norm_order_id(need("order_id", 0)?), amount: need("amount", 1)?.trim().into() }
        }
        "update_address" => {
            let (order, user) = (arg(&args, "order_id", ANY), arg(&args, "user_id", ANY));
            let keyed = order.is_some() || user.is_some();
            let (order, user) = match (order, user, arg(&args, "", 0)) {
                (None, None, Some(id)) if is_order_id(id) => (Some(id), None),
                (None, None, id) => (None, id),
                (o, u, _) => (o, u),
            };
            let address = canon_address(need("address", if keyed { 0 } else { 1 })?);
            if order.is_none() && user.is_none() {
                return Err(err(ErrKind::BadArgs, "update_address needs user_id or order_id"));
            }
            Call::Readdress { order: order.map(norm_order_id), user: user.map(lower), address }
        }
        _ => Call::Transfer(arg(&args, "summary", 0).unwrap_or("").to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, raw: &str) -> Result<Call, ToolError> {
        parse_call(&ToolCall { name: name.into(), raw_args: raw.into() })
    }

    #[test]
    fn arguments_by_key_or_position_normalise_alike() {
        let by_key = call("get_order", "order_id=\"#w1234567\"");
        assert_eq!(by_key, call("get_order", "W1234567"));
        assert_eq!(by_key, Ok(Call::GetOrder("W1234567".into())));
        let find = call("find_user", "\"Ann  LEE\", 12345").unwrap();
        assert_eq!(find, Call::FindUser { email: None, name: Some("ann lee".into()), zip: Some("12345".into()) });
        let by_mail = call("find_user", "ann.lee1@example.com").unwrap();
        assert_eq!(by_mail, Call::FindUser { email: Some("ann.lee1@example.com".into()), name: None, zip: None });
        let moved = call("update_address", "\"#W1234567\", \"1 oak street,fairview\"").unwrap();
        let want =
            Call::Readdress { order: Some("W1234567".into()), user: None, address: "1 Oak Street, Fairview".into() };
        assert_eq!(moved, want);
        let home = call("update_address", "ann_lee_1234, address=\"1 Oak Street, Fairview\"").unwrap();
        assert!(matches!(home, Call::Readdress { order: None, user: Some(u), .. } if u == "ann_lee_1234"));
    }

    #[test]
    fn bad_calls_say_why() {
        assert_eq!(call("fly", "").unwrap_err().kind, ErrKind::Unknown);
        assert_eq!(call("get_order", "\"open").unwrap_err().kind, ErrKind::Malformed);
        assert_eq!(call("get_order", "").unwrap_err().kind, ErrKind::BadArgs);
        assert_eq!(call("find_user", "name=\"Ann Lee\"").unwrap_err().kind, ErrKind::BadArgs);
        assert_eq!(call("cancel_order", "W1").unwrap_err().kind, ErrKind::BadArgs);
        assert_eq!(call("update_address", "address=\"x\"").unwrap_err().kind, ErrKind::BadArgs);
        assert!(matches!(call("transfer_to_human", ""), Ok(Call::Transfer(_))));
    }
}
