//! `rediss://` against a real redis-server listening with TLS only, on certificates this test
//! makes (a CA and a server certificate for localhost/127.0.0.1): a role configured with the CA
//! (`redis.tls_ca_file`), an ACL user and its password from an environment variable connects
//! and works; the same server is refused without the CA (an unknown issuer), and plain
//! `redis://` to the TLS port gets no answer.
#![allow(clippy::unwrap_used, reason = "test code: a panic is the failure report")]

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use protocol::acl::{acl_file, AclUser};
use protocol::config::ReagentConfig;
use protocol::link::{LinkSettings, RedisLink};
use protocol::redis_auth::target_with;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Writes ca.pem, server.pem and server.key into `dir`.
fn certificates(dir: &Path) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    for (name, text) in [("ca.pem", ca.pem()), ("server.pem", server.pem()), ("server.key", key.serialize_pem())] {
        std::fs::write(dir.join(name), text).unwrap();
    }
}

fn start_tls_server(dir: &Path, port: u16, admin_password: &str) -> Killed {
    std::fs::write(dir.join("users.acl"), acl_file(&[(AclUser::Admin, admin_password)], "*")).unwrap();
    let d = dir.display();
    let conf = format!(
        "port 0\ntls-port {port}\nbind 127.0.0.1\nprotected-mode yes\nsave \"\"\nappendonly no\n\
         dir \"{d}\"\nlogfile \"{d}/redis.log\"\naclfile \"{d}/users.acl\"\ntls-cert-file \"{d}/server.pem\"\n\
         tls-key-file \"{d}/server.key\"\ntls-ca-cert-file \"{d}/ca.pem\"\ntls-auth-clients no\n"
    );
    let mut f = std::fs::File::create(dir.join("redis.conf")).unwrap();
    f.write_all(conf.as_bytes()).unwrap();
    let binary = protocol::redis_server::find_binary(None).unwrap();
    let child = Command::new(binary)
        .arg(dir.join("redis.conf"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Killed(child)
}

fn settings() -> LinkSettings {
    LinkSettings {
        connect_timeout: Duration::from_secs(1),
        retry_for: Duration::from_millis(500),
        backoff_min: Duration::from_millis(20),
        backoff_max: Duration::from_millis(100),
        ..LinkSettings::default()
    }
}

fn link(toml: &str, password: &str) -> Result<RedisLink, String> {
    let cfg = ReagentConfig::from_toml_str(toml).map_err(|e| e.to_string())?;
    let target = target_with(&cfg.redis, |n| (n == "TLS_TEST_PW").then(|| password.to_string()));
    Ok(RedisLink::from_target(target.map_err(|e| e.to_string())?, settings()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_with_the_ca_file_works_and_is_refused_without_it() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let port = testkit::free_port().unwrap();
    let password = protocol::acl::random_password();
    let _server = start_tls_server(dir.path(), port, &password);
    let ca = dir.path().join("ca.pem");
    let good = format!(
        "[redis]\nurl = \"rediss://localhost:{port}\"\nuser = \"admin\"\npassword_env = \"TLS_TEST_PW\"\n\
         tls_ca_file = \"{}\"\n",
        ca.display()
    );
    let tls = link(&good, &password).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while let Err(e) = tls.ping().await {
        assert!(Instant::now() < deadline, "no TLS PING within 20 s: {e}; see {}/redis.log", dir.path().display());
    }
    let set: String =
        tls.call("set", Duration::ZERO, |mut c| async move {
            redis::cmd("SET").arg("k").arg("v").query_async(&mut c).await
        })
        .await
        .unwrap();
    assert_eq!(set, "OK");

    let wrong_password = link(&good, "not-the-password").unwrap().ping().await.unwrap_err().to_string();
    assert!(!wrong_password.contains("not-the-password"), "{wrong_password}");

    let no_ca =
        format!("[redis]\nurl = \"rediss://localhost:{port}\"\nuser = \"admin\"\npassword_env = \"TLS_TEST_PW\"\n");
    let err = link(&no_ca, &password).unwrap().ping().await.unwrap_err().to_string();
    assert!(err.contains("rediss://localhost"), "names the endpoint: {err}");
    let plain = RedisLink::connect(&format!("redis://127.0.0.1:{port}"), settings()).unwrap();
    assert!(plain.ping().await.is_err(), "plain text to the TLS port");
}
