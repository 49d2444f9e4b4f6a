//! Parsing of stream replies (XREADGROUP, XCLAIM, XPENDING, XINFO GROUPS) from raw values,
//! so that odd replies become errors that say what was odd rather than panics.

use redis::Value;

use crate::error::{ProtocolError, Result};

/// One stream entry as read: its stream id and fields.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RawEntry {
    pub id: String,
    pub fields: Vec<(String, Vec<u8>)>,
}

impl RawEntry {
    pub fn field(&self, name: &str) -> Option<&[u8]> {
        self.fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_slice())
    }
}

/// One row of extended XPENDING: id, owner, idle time, delivery count.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PendingRow {
    pub id: String,
    pub consumer: String,
    pub deliveries: u64,
}

/// One group of XINFO GROUPS.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct GroupInfo {
    pub name: String,
    pub pending: u64,
    pub last_delivered_id: String,
    /// `None` when Redis cannot determine it.
    pub lag: Option<u64>,
}

fn odd(op: &'static str, detail: impl Into<String>) -> ProtocolError {
    ProtocolError::UnexpectedReply { op, detail: detail.into() }
}

pub(crate) fn bytes(op: &'static str, v: &Value) -> Result<Vec<u8>> {
    match v {
        Value::BulkString(b) => Ok(b.clone()),
        Value::SimpleString(s) => Ok(s.clone().into_bytes()),
        Value::Int(i) => Ok(i.to_string().into_bytes()),
        other => Err(odd(op, format!("expected a string, got {other:?}"))),
    }
}

pub(crate) fn text(op: &'static str, v: &Value) -> Result<String> {
    String::from_utf8(bytes(op, v)?).map_err(|_| odd(op, "expected UTF-8 text"))
}

fn int(op: &'static str, v: &Value) -> Result<u64> {
    match v {
        Value::Int(i) => u64::try_from(*i).map_err(|_| odd(op, format!("negative integer {i}"))),
        other => text(op, other)?.parse().map_err(|_| odd(op, format!("expected an integer, got {other:?}"))),
    }
}

fn array<'a>(op: &'static str, v: &'a Value) -> Result<&'a [Value]> {
    match v {
        Value::Array(items) | Value::Set(items) => Ok(items),
        other => Err(odd(op, format!("expected an array, got {other:?}"))),
    }
}

fn into_bytes(op: &'static str, v: Value) -> Result<Vec<u8>> {
    match v {
        Value::BulkString(b) => Ok(b),
        other => bytes(op, &other),
    }
}

fn into_text(op: &'static str, v: Value) -> Result<String> {
    String::from_utf8(into_bytes(op, v)?).map_err(|_| odd(op, "expected UTF-8 text"))
}

fn into_array(op: &'static str, v: Value) -> Result<Vec<Value>> {
    match v {
        Value::Array(items) | Value::Set(items) => Ok(items),
        other => Err(odd(op, format!("expected an array, got {other:?}"))),
    }
}

/// `[id, [field, value, ...]]` (a nil body, for an entry deleted meanwhile, yields `None`).
/// Takes the reply by value so ids, names and payloads move out of it rather than being copied.
fn entry(op: &'static str, v: Value) -> Result<Option<RawEntry>> {
    let parts = into_array(op, v)?;
    let n = parts.len();
    let Ok([id, body]) = <[Value; 2]>::try_from(parts) else { return Err(odd(op, format!("entry of {n} parts"))) };
    if matches!(body, Value::Nil) {
        return Ok(None);
    }
    let flat = into_array(op, body)?;
    if flat.len() % 2 != 0 {
        return Err(odd(op, "odd number of field items"));
    }
    let mut fields = Vec::with_capacity(flat.len() / 2);
    let mut items = flat.into_iter();
    while let (Some(k), Some(val)) = (items.next(), items.next()) {
        fields.push((into_text(op, k)?, into_bytes(op, val)?));
    }
    Ok(Some(RawEntry { id: into_text(op, id)?, fields }))
}

/// A list of entries (XCLAIM, XRANGE).
pub(crate) fn entries(op: &'static str, v: Value) -> Result<Vec<RawEntry>> {
    if matches!(v, Value::Nil) {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for e in into_array(op, v)? {
        if matches!(e, Value::Nil) {
            continue;
        }
        out.extend(entry(op, e)?);
    }
    Ok(out)
}

/// XREADGROUP on one stream: nil (timed out) or `[[stream, entries]]`.
pub(crate) fn read_reply(op: &'static str, v: Value) -> Result<Vec<RawEntry>> {
    match v {
        Value::Nil => Ok(Vec::new()),
        Value::Map(pairs) => pairs.into_iter().next().map_or(Ok(Vec::new()), |(_, es)| entries(op, es)),
        other => {
            let Some(first) = into_array(op, other)?.into_iter().next() else { return Ok(Vec::new()) };
            let parts = into_array(op, first)?;
            let Ok([_, es]) = <[Value; 2]>::try_from(parts) else { return Err(odd(op, "stream reply of wrong shape")) };
            entries(op, es)
        }
    }
}

/// Extended XPENDING rows.
pub(crate) fn pending_rows(op: &'static str, v: &Value) -> Result<Vec<PendingRow>> {
    let mut out = Vec::new();
    for row in array(op, v)? {
        let parts = array(op, row)?;
        let [id, consumer, _idle, deliveries] = parts else { return Err(odd(op, "pending row of wrong shape")) };
        out.push(PendingRow { id: text(op, id)?, consumer: text(op, consumer)?, deliveries: int(op, deliveries)? });
    }
    Ok(out)
}

/// XINFO GROUPS: a list of groups, each a flat key/value array (RESP2) or a map (RESP3).
pub(crate) fn groups(op: &'static str, v: &Value) -> Result<Vec<GroupInfo>> {
    let mut out = Vec::new();
    for g in array(op, v)? {
        let pairs: Vec<(&Value, &Value)> = match g {
            Value::Map(m) => m.iter().map(|(k, v)| (k, v)).collect(),
            other => array(op, other)?.chunks(2).filter_map(|kv| Some((kv.first()?, kv.get(1)?))).collect(),
        };
        let mut info = GroupInfo::default();
        for (k, val) in pairs {
            match text(op, k)?.as_str() {
                "name" => info.name = text(op, val)?,
                "pending" => info.pending = int(op, val)?,
                "last-delivered-id" => info.last_delivered_id = text(op, val)?,
                "lag" => info.lag = if matches!(val, Value::Nil) { None } else { Some(int(op, val)?) },
                _ => {}
            }
        }
        out.push(info);
    }
    Ok(out)
}

/// The `last-generated-id` of an `XINFO STREAM` reply (a flat key/value array or a map).
pub(crate) fn last_generated_id(op: &'static str, v: &Value) -> Result<Option<String>> {
    let pairs: Vec<(&Value, &Value)> = match v {
        Value::Map(m) => m.iter().map(|(k, v)| (k, v)).collect(),
        other => array(op, other)?.chunks(2).filter_map(|kv| Some((kv.first()?, kv.get(1)?))).collect(),
    };
    for (k, val) in pairs {
        if text(op, k)? == "last-generated-id" {
            return Ok(Some(text(op, val)?));
        }
    }
    Ok(None)
}

/// Parses a stream id `ms-seq` into a comparable pair.
pub(crate) fn parse_id(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.split_once('-')?;
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Value {
        Value::BulkString(x.as_bytes().to_vec())
    }

    #[test]
    fn parses_read_and_skips_deleted_entries() {
        let v = Value::Array(vec![Value::Array(vec![
            s("k"),
            Value::Array(vec![
                Value::Array(vec![s("1-0"), Value::Array(vec![s("id"), s("a"), s("p"), s("xy")])]),
                Value::Array(vec![s("2-0"), Value::Nil]),
            ]),
        ])]);
        let es = read_reply("t", v).unwrap();
        assert_eq!(es.len(), 1);
        assert_eq!(es[0].field("p"), Some(&b"xy"[..]));
        assert!(read_reply("t", Value::Nil).unwrap().is_empty());
        assert!(read_reply("t", Value::Int(3)).is_err());
    }

    #[test]
    fn parses_groups_with_nil_lag() {
        let v = Value::Array(vec![Value::Array(vec![
            s("name"),
            s("g"),
            s("pending"),
            Value::Int(2),
            s("last-delivered-id"),
            s("5-1"),
            s("lag"),
            Value::Nil,
        ])]);
        let g = &groups("t", &v).unwrap()[0];
        assert_eq!((g.name.as_str(), g.pending, g.lag), ("g", 2, None));
        assert_eq!(parse_id(&g.last_delivered_id), Some((5, 1)));
    }
}
