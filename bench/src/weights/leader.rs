//! The leader of `reagent bench weights`: per size, starts the followers, publishes versions
//! with the learner's `WeightStore::publish`, waits for every follower to serve each, and times
//! one fetch, one import and one GET of the same bytes alone.

use super::*;

/// A fresh f32 model of `config`'s shape, its weights exported (sorted by name) as `dtype`
/// resolves on the CPU, as the learner publishes them (`weights.dtype`: bf16 halves the bytes).
pub(super) fn fresh_tensors(config: &ModelConfig, dtype: Precision) -> Result<(LoadedModel, Vec<OwnedTensor>)> {
    torch_threads();
    let model = LoadedModel::fresh(config, Device::Cpu, false)?;
    let tensors = policy::weights::export_as(&model.vs, Some(precision_kind(dtype, Device::Cpu)))?;
    Ok((model, tensors))
}

/// As many libtorch threads on this (blocking) thread as a role process gets (1 unless
/// `OMP_NUM_THREADS` says otherwise): libtorch's default spins a thread per core after each
/// parallel region, which took about a quarter of the machine's samples away from the
/// followers and Redis in a profile of this bench.
fn torch_threads() {
    tch::set_num_threads(cluster::launch::procs::threads_per_process() as i32);
}

/// The leader's view of one size: the server, the followers, the tensors to publish.
pub(super) struct Leader {
    pub(super) link: RedisLink,
    pub(super) url: String,
    pub(super) settings: LinkSettings,
    pub(super) weights: WeightSettings,
    /// The redis-server's process, whose CPU time the GETs are charged with.
    pub(super) redis_pid: Option<u32>,
    pub(super) config_path: PathBuf,
    pub(super) dir: PathBuf,
    pub(super) followers: Vec<RoleProcess>,
}

impl Leader {
    /// Fails, naming the follower and its log, if any follower has exited.
    pub(super) fn check_alive(&mut self) -> Result<()> {
        for f in &mut self.followers {
            if let Some(exit) = f.exited() {
                exit?;
                bail!("follower {} exited during the bench; see {}", f.name, f.log.display());
            }
        }
        Ok(())
    }

    pub(super) async fn hash(&self, key: &str) -> Result<Vec<(String, String)>> {
        let key = key.to_string();
        Ok(self
            .link
            .call("hgetall", Duration::ZERO, |mut c| {
                let key = &key;
                async move { redis::cmd("HGETALL").arg(key).query_async(&mut c).await }
            })
            .await?)
    }

    /// Waits until the hash `key` has an entry from every follower; `what` names the wait.
    pub(super) async fn wait_all(&mut self, key: &str, what: &str) -> Result<Vec<(String, String)>> {
        let started = Instant::now();
        loop {
            let entries = self.hash(key).await?;
            if entries.len() >= self.followers.len() {
                return Ok(entries);
            }
            self.check_alive()?;
            if started.elapsed() > WAIT {
                let missing: Vec<&str> = self
                    .followers
                    .iter()
                    .map(|f| f.name.as_str())
                    .filter(|n| !entries.iter().any(|(k, _)| k == n))
                    .collect();
                bail!(
                    "{what}: no word from follower(s) {} within {} s; logs in {}",
                    missing.join(", "),
                    WAIT.as_secs(),
                    self.dir.join("logs").display()
                );
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    pub(super) async fn flush(&self) -> Result<()> {
        self.link
            .call(
                "flushall",
                Duration::ZERO,
                |mut c| async move { redis::cmd("FLUSHALL").query_async::<()>(&mut c).await },
            )
            .await?;
        Ok(())
    }

    pub(super) async fn stop_followers(&mut self) {
        for f in &self.followers {
            f.terminate();
        }
        for f in &mut self.followers {
            f.stop(Duration::from_secs(5)).await;
        }
        self.followers.clear();
    }

    /// One size: followers up, `repeats` versions published and waited for, then the GET.
    pub(super) async fn size(&mut self, mb: u32, n: u16, repeats: u16) -> Result<SizeRow> {
        self.flush().await?;
        let config = model_for(f64::from(mb));
        let (cfg, dtype) = (config.clone(), self.weights.dtype);
        let (model, mut tensors) = tokio::task::spawn_blocking(move || fresh_tensors(&cfg, dtype)).await??;
        let bytes: u64 = tensors.iter().map(|t| t.data.len() as u64).sum();
        eprintln!(
            "bench weights: {mb} MB → {} layers × hidden {} × MLP {}: {bytes} bytes ({dtype:?}) in {} tensors; starting {n} followers …",
            config.num_hidden_layers,
            config.hidden_size,
            config.intermediate_size,
            tensors.len()
        );
        let run = format!("wbench-{mb}mb");
        let run_id = RunId::new(run.as_str())?;
        let keys = Keys::new(&run_id);
        for i in 1..=n {
            let name = format!("f{i}");
            let args = [
                "bench",
                "weights-follower",
                "--redis",
                &self.url,
                "--run",
                &run,
                "--name",
                &name,
                "--mb",
                &mb.to_string(),
            ];
            self.followers.push(RoleProcess::spawn(
                &format!("{run}-{name}"),
                &args,
                &self.config_path,
                &self.dir,
                &[],
            )?);
        }
        // RoleProcess names carry the run; the hashes are keyed by the short name.
        for (i, f) in self.followers.iter_mut().enumerate() {
            f.name = format!("f{}", i + 1);
        }
        self.wait_all(&keys.stream("bench:ready"), "waiting for the followers to serve version 0").await?;

        let store = WeightStore::new(&self.link, &run_id, self.weights);
        let mut model = Some(model);
        let mut runs = Vec::new();
        for rep in 1..=repeats {
            let version = PolicyVersion(u64::from(rep));
            // New content per version: the first bytes become the version number.
            tensors[0].data[..2].copy_from_slice(&rep.to_le_bytes());
            let named: Vec<_> = tensors.iter().map(|t| t.as_named()).collect();
            let commit = now_us();
            store.publish(version, &named).await?;
            let published = now_us();
            let entries =
                self.wait_all(&keys.stream(&format!("bench:swapped:{rep}")), &format!("version {rep}")).await?;
            let swaps: Vec<Swap> = entries
                .iter()
                .map(|(name, v)| Swap::decode(v).ok_or_else(|| anyhow!("follower {name} reported {v:?}")))
                .collect::<Result<_>>()?;
            let latency = sync_latency(commit, &swaps).context("no swaps")?;
            let sync = median(&swaps.iter().map(|s| s.sync_us as f64).collect::<Vec<_>>());

            let t = Instant::now();
            let set = store.fetch(version).await?;
            let fetch_alone = t.elapsed();
            let mut m = model.take().context("model")?;
            let (m, import_alone) = tokio::task::spawn_blocking(move || -> Result<_> {
                torch_threads();
                let t = Instant::now();
                policy::weights::import_weight_set(&mut m.vs, &set)?;
                Ok((m, t.elapsed()))
            })
            .await??;
            model = Some(m);
            let r = Repeat {
                publish: Duration::from_micros(published.saturating_sub(commit)),
                latency,
                notice_to_serving: Duration::from_micros(sync as u64),
                fetch_alone,
                import_alone,
            };
            eprintln!(
                "bench weights:   {mb} MB v{rep}: publish {:.1} ms, all {n} swapped after {:.1} ms",
                ms(r.publish),
                ms(r.latency)
            );
            runs.push(r);
        }
        self.stop_followers().await;
        drop(model);

        // The reference: one GET of the same bytes, same server, nothing else running.
        let blob_key = keys.stream("bench:blob");
        let blob = vec![0x5au8; bytes as usize];
        let extra = Duration::from_millis(bytes / 50_000);
        self.link
            .call("set blob", extra, |mut c| {
                let (key, blob) = (&blob_key, &blob);
                async move { redis::cmd("SET").arg(key).arg(blob.as_slice()).query_async::<()>(&mut c).await }
            })
            .await?;
        drop(blob);
        let get_link = RedisLink::connect(&self.url, self.settings)?;
        get_link.ping().await?;
        let mut gets = Vec::new();
        let cpu_before = cpu_ticks(self.redis_pid);
        for _ in 0..repeats {
            let t = Instant::now();
            let got: Vec<u8> = get_link
                .call("get blob", extra, |mut c| {
                    let key = &blob_key;
                    async move { redis::cmd("GET").arg(key).query_async(&mut c).await }
                })
                .await?;
            gets.push(t.elapsed());
            if got.len() as u64 != bytes {
                bail!("GET returned {} bytes, not {bytes}", got.len());
            }
        }
        let per_get = |before: u64, after: u64| ticks(after.saturating_sub(before)) / u32::from(repeats);
        let get_cpu =
            cpu_before.zip(cpu_ticks(self.redis_pid)).map(|((server, client), (server_after, client_after))| {
                (per_get(server, server_after), per_get(client, client_after))
            });
        self.flush().await?;
        Ok(SizeRow { mb, followers: n, bytes, tensors: tensors.len(), repeats: runs, gets, get_cpu })
    }
}

#[cfg(test)]
mod tests {
    use protocol::wire::DType;
    use tch::Kind;

    use super::*;

    /// `weights.dtype = bf16` publishes (and actors fetch) half the bytes of f32, and an f32
    /// actor imports the bf16-rounded weights; `auto` on the CPU publishes f32.
    #[tokio::test]
    async fn bf16_moves_half_the_bytes_and_imports_rounded() {
        let server = RedisServer::start(RedisServerOptions::default()).unwrap();
        let link = RedisLink::connect(&server.url(), LinkSettings::default()).unwrap();
        let store = WeightStore::new(&link, &RunId::new("bf16").unwrap(), WeightSettings::default());
        let config = model_for(1.0);
        let f32_bytes = weight_bytes(&config);

        let (_, auto) = fresh_tensors(&config, Precision::Auto).unwrap();
        assert!(auto.iter().all(|t| t.dtype == DType::F32));
        assert_eq!(auto.iter().map(|t| t.data.len() as u64).sum::<u64>(), f32_bytes);

        let (source, bf16) = fresh_tensors(&config, Precision::Bf16).unwrap();
        assert!(bf16.iter().all(|t| t.dtype == DType::BF16));
        let named: Vec<_> = bf16.iter().map(OwnedTensor::as_named).collect();
        let published = store.publish(PolicyVersion(1), &named).await.unwrap();
        assert_eq!(published.total_len(), f32_bytes / 2, "bf16 publishes half the bytes");
        let set = store.fetch(PolicyVersion(1)).await.unwrap();
        assert_eq!(set.len(), f32_bytes / 2, "and actors fetch half");

        let mut actor = LoadedModel::fresh(&config, Device::Cpu, false).unwrap();
        policy::weights::import_weight_set(&mut actor.vs, &set).unwrap();
        let (got, want) = (actor.vs.variables(), source.vs.variables());
        for (name, t) in &want {
            let rounded = t.to_kind(Kind::BFloat16).to_kind(Kind::Float);
            assert_eq!(got[name].kind(), Kind::Float, "{name}: the actor's model stays f32");
            assert!(got[name].equal(&rounded), "{name}: the bf16-rounded weights are served");
        }
    }
}
