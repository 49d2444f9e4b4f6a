//! The process's dataset. A [`TaskSpec`](protocol::wire::TaskSpec) names a task by (family,
//! seed, difficulty) only, and every role makes environments from specs alone
//! (`registry::make`): the env-worker, in-process actors, the RRM worker's reference judge and
//! the learner's cold start. So the dataset is loaded once per process, from `[dataset]`, when
//! the configuration loads (`reagent`'s settings), and every `dataset` task comes from it.
//!
//! ```text
//!  configuration ─► load_config([dataset]) ─► Catalog (every line checked) ─► install ─┐
//!  registry::make(spec{dataset, seed, difficulty}) ─► installed()?.task(seed, difficulty) ◄┘
//! ```
//!
//! One dataset per process: installing the same one again is a no-op, a different one an error.

use std::sync::{Arc, RwLock};

use super::catalog::{Catalog, DatasetConfig};
use super::error::DatasetError;

static INSTALLED: RwLock<Option<Arc<Catalog>>> = RwLock::new(None);

/// Makes `catalog` the process's dataset; `Ok` also when an equal one is already installed.
pub fn install(catalog: Catalog) -> Result<Arc<Catalog>, DatasetError> {
    let mut slot = INSTALLED.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    match slot.as_ref() {
        Some(current) if **current == catalog => Ok(current.clone()),
        Some(_) => Err(DatasetError::AlreadyLoaded),
        None => {
            let catalog = Arc::new(catalog);
            *slot = Some(catalog.clone());
            Ok(catalog)
        }
    }
}

/// The process's dataset.
pub fn installed() -> Result<Arc<Catalog>, DatasetError> {
    INSTALLED.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone().ok_or(DatasetError::NotLoaded)
}

/// Reads `[dataset]` (the configuration's table), loads and checks its files and installs the
/// dataset; `None` when no files are configured. Called where the configuration loads, so that
/// a malformed line stops the process before it starts anything.
pub fn load_config(table: &toml::Table) -> Result<Option<Arc<Catalog>>, DatasetError> {
    let cfg = DatasetConfig::from_table(table)?;
    if cfg.files.is_empty() {
        return Ok(None);
    }
    install(Catalog::load(&cfg)?).map(Some)
}
