//! A queue role as its own OS process, for tests that kill processes with SIGKILL:
//!
//! ```text
//! queue-worker produce URL STREAM FROM TO     write ids FROM..TO, then exit
//! queue-worker forward URL SRC DST NAME       forward SRC → DST as consumer NAME, forever
//! ```

use anyhow::{bail, Context, Result};
use protocol::link::{LinkSettings, RedisLink};
use protocol::queue::{Consumer, Producer};
use reagent_tests::ProbeItem;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).cloned().with_context(|| format!("missing argument {i}; see the file header"));
    let link = RedisLink::connect(&arg(1)?, LinkSettings::default())?;
    // Short reads and a 2 s lease: a killed forwarder's entries are reclaimed within seconds,
    // and a stalled one does not lose its own.
    let settings = testkit::fast_queue();
    match arg(0)?.as_str() {
        "produce" => {
            let producer = Producer::<ProbeItem>::new(link, arg(2)?, "g", settings).await?;
            let (from, to): (u64, u64) = (arg(3)?.parse()?, arg(4)?.parse()?);
            let items: Vec<ProbeItem> = (from..to).map(|id| ProbeItem { id, body: vec![7; 256] }).collect();
            for chunk in items.chunks(10) {
                producer.send_batch(chunk).await?;
            }
        }
        "forward" => {
            let out = Producer::<ProbeItem>::new(link.clone(), arg(3)?, "sink", settings).await?;
            let mut consumer = Consumer::<ProbeItem>::new(&link, arg(2)?, "g", arg(4)?, settings).await?;
            loop {
                let batch = consumer.next_batch().await?;
                let moves: Vec<(String, ProbeItem)> = batch.into_iter().map(|d| (d.entry_id, d.item)).collect();
                consumer.forward(&out, &moves).await?;
            }
        }
        other => bail!("unknown role {other:?}: expected produce or forward"),
    }
    Ok(())
}
