//! Making a running redis-server a replica of another (`REPLICAOF`, authenticating to the
//! primary as a given user), and asking whether its replication link is up: for the weight
//! fan-out's node replicas in tests and `reagent bench fanout`. A replica needs the same ACL
//! users as its primary (ACL files are per server) for readers to log in to it.
//!
//! ```text
//!  learner ──► primary ──replication──► replica A ──► readers (weights.read_url = A)
//!                                   └─► replica B ──► replica C (chained: REPLICAOF B)
//! ```

use std::time::Duration;

use crate::error::Result;
use crate::link::RedisLink;

/// Who a replica logs in to its primary as: the `replica` ACL user (PSYNC, REPLCONF and INFO,
/// no key), or any user allowed those.
#[derive(Clone)]
pub struct PrimaryAuth {
    /// The ACL user.
    pub user: String,
    /// Its password.
    pub password: String,
}

impl std::fmt::Debug for PrimaryAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrimaryAuth").field("user", &self.user).finish_non_exhaustive()
    }
}

/// Makes the server behind `replica` (a link with CONFIG rights) replicate `host:port`,
/// logging in with `auth` when given. The replica drops its own data and loads the primary's
/// in the background; see [`link_up`].
pub async fn replicate(replica: &RedisLink, host: &str, port: u16, auth: Option<&PrimaryAuth>) -> Result<()> {
    if let Some(auth) = auth {
        config_set(replica, "masteruser", &auth.user).await?;
        config_set(replica, "masterauth", &auth.password).await?;
    }
    let port = port.to_string();
    replica
        .call("replicaof", Duration::ZERO, |mut c| {
            let port = &port;
            async move { redis::cmd("REPLICAOF").arg(host).arg(port).query_async::<()>(&mut c).await }
        })
        .await
}

/// Whether the replica's link to its primary is up and its first sync is done
/// (`master_link_status:up` in `INFO replication`).
pub async fn link_up(replica: &RedisLink) -> Result<bool> {
    let info: String = replica
        .call("info replication", Duration::ZERO, |mut c| async move {
            redis::cmd("INFO").arg("replication").query_async(&mut c).await
        })
        .await?;
    Ok(info.lines().any(|l| l.trim() == "master_link_status:up"))
}

async fn config_set(link: &RedisLink, key: &str, value: &str) -> Result<()> {
    link.call("config set", Duration::ZERO, |mut c| async move {
        redis::cmd("CONFIG").arg("SET").arg(key).arg(value).query_async::<()>(&mut c).await
    })
    .await
}
