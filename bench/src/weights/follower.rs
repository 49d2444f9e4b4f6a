//! The hidden `reagent bench weights-follower`: the actors' weight-sync path (a policy actor and
//! a weight-sync actor under a supervisor) over a model of ≈ `--mb` MB, reporting to Redis when
//! it serves each new version.

use std::sync::atomic::Ordering;

use super::*;

/// The hidden follower: a policy actor and a weight-sync actor over a model of ≈ `--mb` MB,
/// reporting when each new version is served.
pub async fn follower(config: &ReagentConfig, args: WeightsFollowerArgs) -> Result<()> {
    let started = Instant::now();
    let parent = std::os::unix::process::parent_id();
    let run = RunId::new(args.run.as_str())?;
    let keys = Keys::new(&run);
    let link = RedisLink::connect(&args.redis, LinkSettings::from(&config.redis))?;
    let store = WeightStore::new(&link, &run, WeightSettings::from(&config.weights));
    let stats = Arc::new(Stats::default());
    let call_timeout = Duration::from_secs(60);
    let policy = Handle::new("policy");
    let policy_args = PolicyArgs {
        model: ModelSpec { config: model_for(f64::from(args.mb)), dir: None, device: DeviceChoice::Cpu },
        tokenizer: Arc::new(ByteTokenizer),
        sampling: SamplingParams::default(),
        max_batch: 1,
        max_wait: Duration::from_millis(1),
        store: Some(store.clone()),
        load_timeout: WAIT,
        seed: 0,
        prefix_cache_bytes: 0,
    };
    let sync_args = WeightSyncArgs {
        store: store.clone(),
        policy: policy.clone(),
        slice: store.settings().poll_interval.min(Duration::from_secs(1)),
        call_timeout,
        stats: stats.clone(),
    };
    let children: Vec<Arc<dyn ChildSpec>> = vec![
        Arc::new(Child::<PolicyActor>::service("policy", policy.clone(), move || (PolicyActor, policy_args.clone()))),
        Arc::new(Child::<WeightSync>::service("weight-sync", Handle::new("weight-sync"), move || {
            (WeightSync, sync_args.clone())
        })),
    ];
    let _supervised = Supervised::start(SupervisorArgs {
        children,
        policy: RestartPolicy {
            max_restarts: 0,
            window: Duration::from_secs(60),
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(1),
        },
        drain: CancellationToken::new(),
        service_stop_timeout: Duration::from_secs(5),
        record: Arc::default(),
    })
    .await?;

    let hset = |key: String, value: String| {
        let (link, name) = (link.clone(), args.name.clone());
        async move {
            link.call("hset", Duration::ZERO, |mut c| {
                let (key, name, value) = (&key, &name, &value);
                async move { redis::cmd("HSET").arg(key).arg(name).arg(value).query_async::<()>(&mut c).await }
            })
            .await
        }
    };
    let served = policy.call("version", PolicyMsg::Version, call_timeout).await?;
    if served != PolicyVersion(0) {
        bail!("follower {} started serving {served}, not version 0", args.name);
    }
    hset(keys.stream("bench:ready"), now_us().to_string()).await?;
    // The weight-sync actor observes its latency and then counts the swap, so a new count means
    // the policy serves the new version and its notice → serving time is in the histogram.
    let mut swaps = stats.weight_swaps.load(Ordering::Acquire);
    let mut sync_sum = ACTOR_WEIGHT_SYNC_SECONDS.get_sample_sum();
    let mut ticks = tokio::time::interval(VERSION_POLL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let now_swaps = stats.weight_swaps.load(Ordering::Acquire);
        if now_swaps != swaps {
            let at_us = now_us();
            let sum = ACTOR_WEIGHT_SYNC_SECONDS.get_sample_sum();
            let sync_us = ((sum - sync_sum).max(0.0) * 1e6) as u64;
            (swaps, sync_sum) = (now_swaps, sum);
            let served = policy.call("version", PolicyMsg::Version, call_timeout).await?;
            hset(keys.stream(&format!("bench:swapped:{}", served.0)), Swap { at_us, sync_us }.encode()).await?;
        }
        if std::os::unix::process::parent_id() != parent || started.elapsed() > FOLLOWER_LIFETIME {
            return Ok(());
        }
    }
}
