//! The `[actor]` section as `config/default.toml` carries it, and errors that name the key.

use protocol::config::ReagentConfig;

use super::*;

fn with(toml: &str) -> Result<ActorConfig> {
    ActorConfig::from_config(&ReagentConfig::from_toml_str(toml).map_err(crate::ActorError::from)?)
}

fn err_of(toml: &str) -> String {
    with(toml).unwrap_err().to_string()
}

#[test]
fn the_documented_section_parses_and_validates() {
    let c = with("").unwrap();
    assert_eq!((c.group_size, c.temperature, c.model_source()), (8, 0.7, ModelSource::Builtin("tiny".into())));
    assert_eq!(c.task_mix(), vec![(TaskFamily::Math, 1)]);
    assert!(c.env_workers.is_empty());
    let r = c.rollout_config();
    assert_eq!((r.max_new_tokens, r.limits.max_turns, r.max_batch), (c.max_new_tokens, c.max_turns, c.max_batch));
    assert_eq!(c.restart_policy().max_restarts, c.restart_max);
    assert_eq!((c.refine, r.refine), (RefineWhich::All, RefineWhich::All));
    assert_eq!(with("[actor]\nrefine = \"failed\"\n").unwrap().rollout_config().refine, RefineWhich::Failed);
}

#[test]
fn families_and_difficulties_take_one_value_or_a_list() {
    let c = with("[actor]\nfamily = [\"math\", \"webnav\"]\ndifficulty = [1, 3]\n").unwrap();
    assert_eq!(
        c.task_mix(),
        vec![(TaskFamily::Math, 1), (TaskFamily::Math, 3), (TaskFamily::Webnav, 1), (TaskFamily::Webnav, 3)]
    );
    assert_eq!(
        with("[actor]\nmodel = \"/models/qwen\"\n").unwrap().model_source(),
        ModelSource::Dir("/models/qwen".into())
    );
}

#[test]
fn unknown_keys_and_bad_values_name_the_key() {
    assert!(err_of("[actor]\nslot = 2\n").contains("slot"));
    assert!(err_of("[actor]\nslots = \"two\"\n").contains("actor.slots"));
    assert!(err_of("[actor]\nslots = 0\n").starts_with("config key `actor.slots`: expected an integer in 1..=4096"));
    assert!(err_of("[actor]\nfamily = \"cartpole\"\n").contains("actor.family"));
    assert!(err_of("[actor]\nfamily = []\n").contains("actor.family"));
    assert!(err_of("[actor]\ndifficulty = [1, 9]\n").contains("actor.difficulty"));
    assert!(err_of("[actor]\ntop_p = 0.0\n").contains("actor.top_p"));
    assert!(err_of("[actor]\ntemperature = -1.0\n").contains("actor.temperature"));
    assert!(err_of("[actor]\nmax_context_tokens = 8\nmax_new_tokens = 8\n").contains("actor.max_context_tokens"));
    assert!(err_of("[actor]\nenv_workers = [\"nowhere\"]\n").contains("actor.env_workers"));
    assert!(err_of("[actor]\ndevice = \"tpu\"\n").contains("actor.device"));
    assert!(err_of("[actor]\nsystem_prompt = \"some\"\n").contains("actor.system_prompt"));
    assert!(err_of("[actor]\nrefine = \"solved\"\n").contains("actor.refine"));
    assert!(err_of("[actor]\nrestart_backoff_max_ms = 1\n").contains("actor.restart_backoff_max_ms"));
    assert!(with("[actor]\nenv_workers = [\"env-0.env.svc:7000\", \"127.0.0.1:7001\"]\n").is_ok());
}

#[test]
fn http_tasks_go_with_environment_server_urls_and_only_with_them() {
    let ok =
        with("[actor]\nfamily = \"http\"\nenv_workers = [\"http://127.0.0.1:8765\", \"https://env:443/x\"]\n").unwrap();
    assert_eq!(ok.task_mix(), vec![(TaskFamily::Http, 1)]);
    let cases = [
        ("family = \"http\"\n", "actor.env_workers"),
        ("family = \"http\"\nenv_workers = [\"127.0.0.1:7100\"]\n", "actor.env_workers"),
        ("family = \"http\"\nenv_workers = [\"http://a:1\", \"b:2\"]\n", "actor.env_workers"),
        ("family = [\"http\", \"math\"]\nenv_workers = [\"http://a:1\"]\n", "actor.family"),
        ("env_workers = [\"http://a:1\"]\n", "actor.family"),
        ("env_workers = [\"ftp://a:1\"]\n", "actor.env_workers"),
    ];
    for (section, key) in cases {
        let err = err_of(&format!("[actor]\n{section}"));
        assert!(err.contains(key), "{section}: {err}");
    }
}
