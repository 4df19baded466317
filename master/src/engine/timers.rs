//! The engine's timers: a task's delay or retry interval, an instance's timeout. One heap
//! of due times that the engine's loop sleeps on (no task or thread per timer, so 10,000
//! pending timers cost a heap of 10,000 entries). Due times derive from what the store
//! records (an attempt's `submitted_at`, an instance's `started_at`), so a master that
//! takes an instance over resumes its timers instead of starting them again.

use super::{EngineMsg, Node};
use shoal_common::types::now_ms;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;
use tokio::time::Instant;

/// What a timer brings when it is due.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Due {
    /// The attempt's delay or retry interval is over.
    Ready {
        instance: i64,
        node: Node,
        attempt: i32,
    },
    /// The workflow's timeout passed for run `run_no`.
    Timeout { instance: i64, run_no: i32 },
}

impl Due {
    fn into_msg(self) -> EngineMsg {
        match self {
            Due::Ready {
                instance,
                node,
                attempt,
            } => EngineMsg::Ready {
                instance,
                node,
                attempt,
            },
            Due::Timeout { instance, run_no } => EngineMsg::Timeout { instance, run_no },
        }
    }
}

#[derive(Default)]
pub(super) struct Timers {
    heap: BinaryHeap<Reverse<(Instant, Due)>>,
}

impl Timers {
    /// Brings `due` at the wall-clock time `at_ms` (at once if that has passed).
    pub fn at(&mut self, at_ms: i64, due: Due) {
        let left = Duration::from_millis((at_ms - now_ms()).max(0) as u64);
        self.heap.push(Reverse((Instant::now() + left, due)));
    }

    /// When the earliest timer is due.
    pub fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    /// The messages of every timer due by now, earliest first. A timer whose attempt or
    /// run ended meanwhile still fires: the runtime ignores what no longer applies.
    pub fn due(&mut self) -> Vec<EngineMsg> {
        let now = Instant::now();
        let mut msgs = Vec::new();
        while self.heap.peek().is_some_and(|Reverse((at, _))| *at <= now) {
            let Some(Reverse((_, due))) = self.heap.pop() else {
                break;
            };
            msgs.push(due.into_msg());
        }
        msgs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn timers_fire_in_due_order_and_not_before() {
        let mut t = Timers::default();
        let ready = |node| Due::Ready {
            instance: 1,
            node,
            attempt: 1,
        };
        t.at(now_ms() + 2_000, ready(2));
        t.at(now_ms() + 1_000, ready(1));
        t.at(
            now_ms() - 5_000,
            Due::Timeout {
                instance: 1,
                run_no: 1,
            },
        );
        assert!(
            matches!(t.due()[..], [EngineMsg::Timeout { .. }]),
            "a past time fires at once"
        );
        tokio::time::advance(Duration::from_millis(900)).await;
        assert!(t.due().is_empty(), "not before");
        tokio::time::advance(Duration::from_millis(1_100)).await;
        let nodes: Vec<Node> = t
            .due()
            .into_iter()
            .map(|m| match m {
                EngineMsg::Ready { node, .. } => node,
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(nodes, vec![1, 2], "earliest first");
        assert_eq!(t.next(), None);
    }
}
