//! The master's priority queue of tasks waiting for a worker.
//!
//! Order: instance priority, then task priority, then submit order. One heap per worker
//! group, so a group without free workers never holds back the others.

use shoal_common::proto::TaskSpec;
use shoal_common::types::Priority;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};

#[derive(Debug, Clone)]
pub struct QueuedTask {
    pub spec: TaskSpec,
    /// When it was first queued (a requeue keeps it), for the dispatch latency metric.
    pub queued_at: std::time::Instant,
    pub group: String,
    pub instance_priority: Priority,
    pub task_priority: Priority,
}

#[derive(Debug)]
struct Entry {
    key: (u8, u8, u64),
    task: QueuedTask,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key.cmp(&other.key)
    }
}

/// A task taken out of the queue; give it back with [`TaskQueue::requeue`] to keep its place.
#[derive(Debug)]
pub struct Popped {
    pub task: QueuedTask,
    seq: u64,
}

#[derive(Default)]
pub struct TaskQueue {
    groups: HashMap<String, BinaryHeap<Reverse<Entry>>>,
    next_seq: u64,
    /// Ids queued and not taken out; removal from a heap is lazy, so a removed task's
    /// entry stays in its heap until popped, and is skipped then.
    queued: HashSet<i64>,
}

impl TaskQueue {
    pub fn push(&mut self, task: QueuedTask) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.insert(task, seq);
    }

    pub fn requeue(&mut self, popped: Popped) {
        self.insert(popped.task, popped.seq);
    }

    fn insert(&mut self, task: QueuedTask, seq: u64) {
        let key = (
            task.instance_priority.rank(),
            task.task_priority.rank(),
            seq,
        );
        self.queued.insert(task.spec.task_instance_id);
        self.groups
            .entry(task.group.clone())
            .or_default()
            .push(Reverse(Entry { key, task }));
    }

    pub fn pop(&mut self, group: &str) -> Option<Popped> {
        let heap = self.groups.get_mut(group)?;
        while let Some(Reverse(e)) = heap.pop() {
            if self.queued.remove(&e.task.spec.task_instance_id) {
                return Some(Popped {
                    task: e.task,
                    seq: e.key.2,
                });
            }
        }
        None
    }

    /// Takes a queued task out; false if it is not in the queue.
    pub fn remove(&mut self, id: i64) -> bool {
        self.queued.remove(&id)
    }

    /// Ids of the tasks queued for `group`, in no particular order.
    pub fn ids(&self, group: &str) -> impl Iterator<Item = i64> + '_ {
        self.groups
            .get(group)
            .into_iter()
            .flat_map(|h| h.iter().map(|Reverse(e)| e.task.spec.task_instance_id))
            .filter(|id| self.queued.contains(id))
    }

    /// Groups that have tasks waiting.
    pub fn waiting_groups(&self) -> Vec<String> {
        self.groups
            .iter()
            .filter(|(_, h)| !h.is_empty())
            .map(|(g, _)| g.clone())
            .collect()
    }

    pub fn len(&self) -> usize {
        self.queued.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: i64, group: &str, inst: Priority, prio: Priority) -> QueuedTask {
        QueuedTask {
            spec: TaskSpec {
                task_instance_id: id,
                ..Default::default()
            },
            queued_at: std::time::Instant::now(),
            group: group.into(),
            instance_priority: inst,
            task_priority: prio,
        }
    }

    #[test]
    fn orders_by_instance_then_task_priority_then_submit_order() {
        let mut q = TaskQueue::default();
        q.push(task(1, "g", Priority::Medium, Priority::Medium));
        q.push(task(2, "g", Priority::Medium, Priority::High));
        q.push(task(3, "g", Priority::High, Priority::Lowest));
        q.push(task(4, "g", Priority::Medium, Priority::Medium));
        let order: Vec<i64> = std::iter::from_fn(|| q.pop("g"))
            .map(|p| p.task.spec.task_instance_id)
            .collect();
        assert_eq!(order, vec![3, 2, 1, 4]);
    }

    #[test]
    fn a_requeued_task_keeps_its_place_and_groups_are_apart() {
        let mut q = TaskQueue::default();
        q.push(task(1, "g", Priority::Medium, Priority::Medium));
        q.push(task(2, "g", Priority::Medium, Priority::Medium));
        q.push(task(9, "other", Priority::Highest, Priority::Highest));
        let first = q.pop("g").unwrap();
        q.requeue(first);
        assert_eq!(q.pop("g").unwrap().task.spec.task_instance_id, 1);
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop("other").unwrap().task.spec.task_instance_id, 9);
        assert!(q.pop("missing").is_none());
    }

    #[test]
    fn a_removed_task_is_never_popped() {
        let mut q = TaskQueue::default();
        q.push(task(1, "g", Priority::Medium, Priority::Medium));
        q.push(task(2, "g", Priority::Medium, Priority::Medium));
        assert!(q.remove(1));
        assert!(!q.remove(1), "only once");
        assert_eq!(q.len(), 1);
        assert_eq!(q.ids("g").collect::<Vec<_>>(), vec![2]);
        assert_eq!(q.pop("g").unwrap().task.spec.task_instance_id, 2);
        assert!(q.pop("g").is_none() && q.is_empty() && q.waiting_groups().is_empty());
    }
}
