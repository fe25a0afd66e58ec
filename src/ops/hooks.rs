//! Fault-injection hooks carried by a [`crate::ops::context::Context`]; the default does nothing.
//!
//! Only the lab (`lab::faults`) sets them, on the contexts of its own scratch lakehouses: an injected
//! planner bug, and callbacks the deleter runs before acceptance, before each batch and before each delete
//! request. Production commands build the default, which is inert.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::future::BoxFuture;

use crate::error::Result;
use crate::govern::closure::{self, Plan, PlanInput};

type HookFn = Arc<dyn Fn() -> BoxFuture<'static, Result<()>> + Send + Sync>;
/// A hook told how many delete requests were sent so far.
type CountHookFn = Arc<dyn Fn(usize) -> BoxFuture<'static, Result<()>> + Send + Sync>;

/// Fault-injection hooks carried by a [`crate::ops::context::Context`]; the default does nothing.
#[derive(Clone, Default)]
pub struct Hooks {
    /// An injected planner bug: the head of a protected ref joins the expired-snapshots candidate.
    pub inject_protected_snapshot: bool,
    /// Runs in `purge` right before the acceptance compare-and-set (a racing hold or lease).
    pub before_accept: Option<HookFn>,
    /// Runs in `purge` before each delete request, inside the registry batch that holds the write lock, with
    /// the number of requests sent so far. It must not write to the registry itself (it would wait for the
    /// batch); a racing hold is spawned from it and waits.
    pub before_delete: Option<CountHookFn>,
    /// Runs in `purge` before each batch, while no registry lock is held, with the requests sent so far.
    pub before_batch: Option<CountHookFn>,
    /// Objects per purge batch instead of `[storage] purge_batch_objects` (small labs need several batches).
    pub purge_batch_size: Option<usize>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("inject_protected_snapshot", &self.inject_protected_snapshot)
            .field("before_accept", &self.before_accept.is_some())
            .field("before_delete", &self.before_delete.is_some())
            .field("before_batch", &self.before_batch.is_some())
            .field("purge_batch_size", &self.purge_batch_size)
            .finish()
    }
}

impl Hooks {
    /// The plan as the (possibly bug-injected) planner returns it.
    #[must_use]
    pub fn planned(&self, input: &PlanInput, plan: Plan) -> Plan {
        if self.inject_protected_snapshot {
            inject_protected(input, plan)
        } else {
            plan
        }
    }

    /// Runs the `before_accept` hook, if any.
    ///
    /// # Errors
    /// The hook's error.
    pub async fn before_accept(&self) -> Result<()> {
        match &self.before_accept {
            Some(h) => h().await,
            None => Ok(()),
        }
    }

    /// Runs the `before_delete` hook, if any, with the number of delete requests sent so far.
    ///
    /// # Errors
    /// The hook's error.
    pub async fn before_delete(&self, sent: usize) -> Result<()> {
        match &self.before_delete {
            Some(h) => h(sent).await,
            None => Ok(()),
        }
    }

    /// Runs the `before_batch` hook, if any, with the number of delete requests sent so far.
    ///
    /// # Errors
    /// The hook's error.
    pub async fn before_batch(&self, sent: usize) -> Result<()> {
        match &self.before_batch {
            Some(h) => h(sent).await,
            None => Ok(()),
        }
    }
}

/// The injected planner bug: adds the head of a protected ref (not the current snapshot) and everything it
/// reaches to the expired-snapshots candidate.
fn inject_protected(input: &PlanInput, mut plan: Plan) -> Plan {
    let victim = input
        .protections
        .protected_refs
        .iter()
        .filter_map(|n| {
            input
                .refs
                .iter()
                .find(|r| crate::govern::policy::protects_ref(n, &r.name))
        })
        .map(|r| r.snapshot_id)
        .find(|id| Some(*id) != input.current_snapshot_id);
    let Some(victim) = victim else { return plan };
    let Some(c) = plan.candidates.iter_mut().find(|c| c.kind == "expired-snapshots") else {
        return plan;
    };
    if c.snapshot_ids.contains(&victim) {
        return plan;
    }
    c.snapshot_ids.push(victim);
    let mut have: BTreeSet<String> = c.objects.iter().map(|o| o.path.clone()).collect();
    if let Some(objs) = input
        .snapshots
        .iter()
        .find(|s| s.snapshot_id == victim)
        .and_then(|s| s.objects.as_ref())
    {
        for o in closure::distinct_objects([objs]) {
            // A file named twice (two manifests, or a Puffin file of several deletion vectors) once.
            if have.insert(o.path.clone()) {
                c.objects.push(o.clone());
            }
        }
    }
    c.objects.sort();
    c.bytes = c.objects.iter().map(|o| o.size).sum();
    c.inventory_root = closure::candidate_root(&c.objects);
    plan
}
