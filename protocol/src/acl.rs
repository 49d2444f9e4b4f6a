//! Least-privilege Redis users, one per role: each may run only the commands it uses, on only
//! the keys it uses (read from [`crate::keys`], the queue and the weight store), through
//! Redis 7 ACL selectors so that a right on one key set is not a right on another (an RRM
//! worker may XADD to `scored` but not XACK there). Lua scripts get a selector spanning the
//! keys they declare; every command inside a script is checked against the user again.
//!
//! ```text
//!  user      keys (P = reagent:{run})                    may
//!  learner   P:scored P:scored:*                         consume (read, ack, claim, dead-letter)
//!            P:weights:*  &P:weights:notify              publish and expire weight versions
//!  actor     P:rollouts                                  produce (XADD; backlog reads)
//!            P:weights:* (read-only) &P:weights:notify   fetch and watch weights
//!            P:actor:seed-blocks  P:critique:*           INCR a seed block; BLPOP its critique
//!  rrm       P:rollouts P:rollouts:*                     consume
//!            P:scored                                    produce
//!            P:critique:*                                reply (DEL, RPUSH, EXPIRE)
//!  keda      P:rollouts P:scored (read-only)             XINFO, XPENDING, XLEN
//!  replica   — (no key, no channel)                      replicate (PSYNC, REPLCONF), INFO: a
//!                                                        node's weights cache logs in to the
//!                                                        primary with it, its probes too
//!  admin     every key and channel                       everything (`reagent status`, ops)
//!  default   —                                           off: every connection authenticates
//! ```
//!
//! Env-workers have no user: they never talk to Redis. Passwords are stored in the ACL file as
//! SHA-256 hashes (`#<hex>`), never in the clear.

use std::fmt;

use sha2::{Digest, Sha256};

/// A role's Redis user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AclUser {
    /// The learner: consumes scored trajectories, publishes weights.
    Learner,
    /// Actors: produce rollouts, read weights, wait for critiques.
    Actor,
    /// RRM workers: consume rollouts, produce scored trajectories, reply with critiques.
    Rrm,
    /// KEDA's scaler: reads stream lengths and group lag, nothing else.
    Keda,
    /// A replica of the primary (the per-node weights cache): the replication handshake and
    /// stream, and INFO for its probes; no key. Replication needs no key rights: the primary
    /// sends its whole dataset down the link whatever the user may read.
    Replica,
    /// Operators and `reagent status`, `reagent run`'s launcher: everything.
    Admin,
}

impl AclUser {
    /// Every user, in the order the ACL file lists them.
    pub const ALL: [AclUser; 6] = [Self::Learner, Self::Actor, Self::Rrm, Self::Keda, Self::Replica, Self::Admin];

    /// The user's name in Redis (and in `redis.user`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Learner => "learner",
            Self::Actor => "actor",
            Self::Rrm => "rrm",
            Self::Keda => "keda",
            Self::Replica => "replica",
            Self::Admin => "admin",
        }
    }

    /// The user a `reagent <role>` process authenticates as; `None` for roles without Redis.
    pub fn for_role(role: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|u| u.name() == role)
    }

    /// The permission rules after `user <name> on #<hash>`: root rights (connection upkeep),
    /// then one selector `( … )` per key set. `run` is the run id, or `*` for every run.
    pub fn rules(self, run: &str) -> String {
        let p = format!("reagent:{{{run}}}");
        let grants: Vec<String> = match self {
            Self::Admin => return "~* &* +@all".into(),
            Self::Replica => return "resetkeys resetchannels -@all +ping +auth +hello +psync +replconf +info".into(),
            Self::Learner => vec![
                consume(&format!("{p}:scored")),
                publish_weights(&p),
                scripts(&[&format!("{p}:scored"), &format!("{p}:scored:*"), &format!("{p}:weights:*")]),
            ],
            Self::Actor => vec![
                produce(&format!("{p}:rollouts")),
                format!("%R~{p}:weights:* &{p}:weights:notify +get +mget +subscribe +unsubscribe"),
                format!("~{p}:actor:seed-blocks +incr"),
                format!("~{p}:critique:* +blpop"),
            ],
            Self::Rrm => vec![
                consume(&format!("{p}:rollouts")),
                produce(&format!("{p}:scored")),
                format!("~{p}:critique:* +del +rpush +expire"),
                scripts(&[&format!("{p}:rollouts"), &format!("{p}:rollouts:*"), &format!("{p}:scored")]),
            ],
            Self::Keda => {
                vec![format!("%R~{p}:rollouts %R~{p}:scored +xinfo|groups +xinfo|stream +xpending +xlen")]
            }
        };
        let selectors: Vec<String> = grants.iter().map(|g| format!("({g})")).collect();
        format!("resetkeys resetchannels -@all {ROOT} {}", selectors.join(" "))
    }
}

impl fmt::Display for AclUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What every user may do without keys: keep its connection up, and run transactions (each
/// queued command is checked on its own). Not CLIENT SETINFO: Redis 7.0 does not know it (an
/// ACL naming it fails to load), and the client ignores its refusal on later versions.
const ROOT: &str = "+ping +hello +auth +client|setname +client|getname +select +multi +exec +discard";

/// Reading a stream as a consumer group member, with the queue's held-marker and failure
/// hashes (`<stream>:held:*`, `<stream>:failures:*`) and dead-letter stream (`<stream>:dead`).
fn consume(stream: &str) -> String {
    format!(
        "~{stream} ~{stream}:* +xreadgroup +xack +xclaim +xpending +xrange +xtrim +xadd +xlen \
         +xinfo|groups +xinfo|stream +xinfo|consumers +xgroup|create +hset +hdel +hget +hexists \
         +hincrby +hgetall +hmget"
    )
}

/// Appending to a stream, creating its group, and reading its backlog for backpressure.
fn produce(stream: &str) -> String {
    format!("~{stream} +xadd +xlen +xrange +xinfo|groups +xinfo|stream +xgroup|create")
}

/// The weight store's writer: versions, chunks, the index, expiry, and the notification.
fn publish_weights(p: &str) -> String {
    format!(
        "~{p}:weights:* &{p}:weights:notify +get +set +mget +del +zadd +zrange +zrem +pexpire \
         +expire +publish"
    )
}

/// Running the queue's and the weight store's Lua scripts, whose declared keys may span two of
/// the selectors above (forwarding moves an entry from one stream to the next). Redis checks
/// every command a script runs against the user's rights again, so this grants no command.
fn scripts(keys: &[&str]) -> String {
    let keys: Vec<String> = keys.iter().map(|k| format!("~{k}")).collect();
    format!("{} +evalsha +eval +script|load", keys.join(" "))
}

/// A Redis ACL file: `default` off, then each `(user, password)` with its rules for run `run`
/// (`*` for any run). Passwords appear only as SHA-256 hashes.
pub fn acl_file(users: &[(AclUser, &str)], run: &str) -> String {
    let mut out = String::from("user default off resetkeys resetchannels -@all\n");
    for (user, password) in users {
        let hash = hex::encode(Sha256::digest(password.as_bytes()));
        out.push_str(&format!("user {} on #{hash} {}\n", user.name(), user.rules(run)));
    }
    out
}

/// A fresh random password: 32 bytes as 64 hex characters.
pub fn random_password() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_holds_hashes_only_and_turns_default_off() {
        let file = acl_file(&[(AclUser::Actor, "pw-actor"), (AclUser::Admin, "pw-admin")], "r1");
        assert!(file.starts_with("user default off"), "{file}");
        assert!(!file.contains("pw-actor") && !file.contains("pw-admin"), "{file}");
        assert!(file.contains(&hex::encode(Sha256::digest(b"pw-actor"))), "{file}");
        assert!(file.contains("%R~reagent:{r1}:weights:*"), "{file}");
    }

    #[test]
    fn passwords_are_long_and_distinct() {
        let (a, b) = (random_password(), random_password());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
