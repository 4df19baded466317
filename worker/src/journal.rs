//! The durable part of the outbox: every terminal task event (with its outputs) is written
//! to `data_dir/outbox.journal` and fsync'd as it is queued for its master, and marked
//! acked once the master acked it. A worker that starts on the data dir resends what its
//! predecessor finished but never got acked, and recognises those attempts when a master
//! asks, so they are not run again.
//!
//! The event is sent while the fsync runs, not after it: a crash before the fsync ends
//! loses the end either way (the task's process has already exited), and a master that
//! acks first only makes the record unneeded. So durability costs a chain of tasks no
//! latency, only the writer's work.
//!
//! The file is a sequence of records: `F` (a finished attempt: its master, the owner's
//! epoch, the event) and `A` (an attempt acked). Appends are batched by one writer thread,
//! so tasks ending together share an fsync; an `A` alone is not fsync'd (losing it only
//! resends an event the master ignores as a duplicate). A torn record at the end (a crash
//! during a write) ends the reading. On open, the file is rewritten with the unacked
//! records only, and at run time it is emptied whenever nothing in it is unacked and it
//! has grown past [`COMPACT_AT`]. (Writing in place into a zero-filled file, so that an
//! fdatasync need not commit a new size, measured no faster: bench/history/README.md.)

use prost::Message;
use shoal_common::proto::TaskEvent;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use tokio::sync::oneshot;
use tracing::{debug, warn};

/// Emptied once it is this large and holds nothing unacked.
const COMPACT_AT: u64 = 4 << 20;

/// A finished attempt whose event its master has not acked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unacked {
    pub(crate) master: String,
    pub(crate) epoch: i64,
    pub(crate) event: TaskEvent,
}

enum Cmd {
    Finished(Unacked),
    Acked(i64, i32),
    /// Answered once everything sent before is on disk.
    Flush(oneshot::Sender<()>),
}

/// Handle to the journal's writer thread; cheap to clone.
#[derive(Clone)]
pub(crate) struct Journal {
    tx: mpsc::Sender<Cmd>,
}

impl Journal {
    /// Opens the journal at `path` (creating it) and returns what is in it unacked.
    pub(crate) fn open(path: &Path) -> io::Result<(Journal, Vec<Unacked>)> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        let (records, torn) = decode(&bytes);
        if torn > 0 {
            warn!(path = %path.display(), bytes = torn, "journal ends in a torn record; it is dropped");
        }
        let unacked = unacked(records);
        let file = match rewrite(path, &unacked) {
            Ok(()) => OpenOptions::new().append(true).open(path)?,
            Err(e) => {
                // A full disk must not keep the worker from starting and resending what it
                // finished: the file stays as it is, less its torn end, and grows on.
                warn!(path = %path.display(), error = %e, "cannot rewrite the journal; appending to it as it is");
                let _ = std::fs::remove_file(path.with_extension("journal.new"));
                let file = OpenOptions::new()
                    .append(true)
                    .create(true)
                    .mode(0o600)
                    .open(path)?;
                file.set_len((bytes.len() - torn) as u64)?;
                file
            }
        };
        let len = file.metadata()?.len();
        let (tx, rx) = mpsc::channel();
        let live = unacked
            .iter()
            .map(|u| (u.event.task_instance_id, u.event.attempt))
            .collect();
        let writer = Writer {
            file,
            path: path.to_path_buf(),
            live,
            pending: Vec::new(),
            len,
        };
        std::thread::Builder::new()
            .name("journal".into())
            .spawn(move || writer.run(rx))?;
        Ok((Journal { tx }, unacked))
    }

    /// Records a finished attempt's event; it is on disk within one fsync (a failed
    /// write is logged: the event is still delivered, just not kept across a restart).
    pub(crate) fn finished(&self, master: &str, epoch: i64, event: &TaskEvent) {
        let record = Unacked {
            master: master.to_string(),
            epoch,
            event: event.clone(),
        };
        if self.tx.send(Cmd::Finished(record)).is_err() {
            warn!(
                task_instance_id = event.task_instance_id,
                "the journal is gone: this event is not kept across a restart"
            );
        }
    }

    /// Waits until everything recorded so far is on disk.
    pub(crate) async fn flush(&self) {
        let (done, written) = oneshot::channel();
        if self.tx.send(Cmd::Flush(done)).is_ok() {
            let _ = written.await;
        }
    }

    /// The master acked the attempt's terminal event (or nobody wants it any more).
    pub(crate) fn acked(&self, task_instance_id: i64, attempt: i32) {
        let _ = self.tx.send(Cmd::Acked(task_instance_id, attempt));
    }
}

struct Writer {
    file: File,
    path: PathBuf,
    /// Attempts with an `F` and no `A` in the file (or in `pending`).
    live: std::collections::HashSet<(i64, i32)>,
    /// Records a failed write could not put in the file (a full disk): written before the
    /// next batch's.
    pending: Vec<u8>,
    /// The file's length.
    len: u64,
}

impl Writer {
    /// Writes what comes, a batch at a time, until every handle is gone.
    fn run(mut self, rx: mpsc::Receiver<Cmd>) {
        while let Ok(first) = rx.recv() {
            let mut buf = std::mem::take(&mut self.pending);
            let (mut durable, mut waiting) = (false, Vec::new());
            for cmd in std::iter::once(first).chain(rx.try_iter()) {
                match cmd {
                    Cmd::Finished(record) => {
                        encode_finished(&record, &mut buf);
                        self.live
                            .insert((record.event.task_instance_id, record.event.attempt));
                        durable = true;
                    }
                    Cmd::Acked(id, attempt) => {
                        if self.live.remove(&(id, attempt)) {
                            encode_acked(id, attempt, &mut buf);
                        }
                    }
                    Cmd::Flush(done) => {
                        durable = true;
                        waiting.push(done);
                    }
                }
            }
            if let Err(e) = self.write(&buf, durable) {
                warn!(path = %self.path.display(), error = %e, "cannot write the journal; trying again with the next record");
                self.pending = buf;
            }
            if let Err(e) = self.compact() {
                warn!(path = %self.path.display(), error = %e, "cannot empty the journal");
            }
            for done in waiting {
                let _ = done.send(());
            }
        }
        debug!("journal writer stopped");
    }

    /// Appends `buf`; with `durable`, waits until it is on disk. A write that fails part
    /// way (a full disk) is cut off again: a torn record in the middle would end the
    /// reading there and hide every record after it.
    fn write(&mut self, buf: &[u8], durable: bool) -> io::Result<()> {
        let written = self.file.write_all(buf).and_then(|()| {
            if durable {
                self.file.sync_data()?;
            }
            Ok(())
        });
        match written {
            Ok(()) => self.len += buf.len() as u64,
            // Best effort: if even this fails, the torn record ends a later reading.
            Err(_) => _ = self.file.set_len(self.len),
        }
        written
    }

    /// Empties the file when it has grown and nothing in it is unacked.
    fn compact(&mut self) -> io::Result<()> {
        if !self.live.is_empty() || self.len < COMPACT_AT {
            return Ok(());
        }
        self.file.set_len(0)?;
        self.len = 0;
        Ok(())
    }
}

fn encode_finished(record: &Unacked, buf: &mut Vec<u8>) {
    buf.push(b'F');
    put_bytes(record.master.as_bytes(), buf);
    buf.extend_from_slice(&record.epoch.to_le_bytes());
    put_bytes(&record.event.encode_to_vec(), buf);
}

fn encode_acked(task_instance_id: i64, attempt: i32, buf: &mut Vec<u8>) {
    buf.push(b'A');
    buf.extend_from_slice(&task_instance_id.to_le_bytes());
    buf.extend_from_slice(&attempt.to_le_bytes());
}

fn put_bytes(bytes: &[u8], buf: &mut Vec<u8>) {
    buf.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    buf.extend_from_slice(bytes);
}

enum Record {
    Finished(Unacked),
    Acked(i64, i32),
}

/// The records in `bytes`, and how many bytes at the end do not form one.
fn decode(bytes: &[u8]) -> (Vec<Record>, usize) {
    let mut records = Vec::new();
    let mut rest = bytes;
    while let Some((record, len)) = decode_one(rest) {
        records.push(record);
        rest = &rest[len..];
    }
    (records, rest.len())
}

fn decode_one(bytes: &[u8]) -> Option<(Record, usize)> {
    let mut r = Reader { bytes, at: 1 };
    let record = match bytes.first()? {
        b'F' => {
            let master = String::from_utf8(r.bytes()?.to_vec()).ok()?;
            let epoch = i64::from_le_bytes(r.take()?);
            let event = TaskEvent::decode(r.bytes()?).ok()?;
            Record::Finished(Unacked {
                master,
                epoch,
                event,
            })
        }
        b'A' => Record::Acked(i64::from_le_bytes(r.take()?), i32::from_le_bytes(r.take()?)),
        _ => return None,
    };
    Some((record, r.at))
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let got = self.bytes.get(self.at..self.at + N)?.try_into().ok()?;
        self.at += N;
        Some(got)
    }

    fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = u32::from_le_bytes(self.take()?) as usize;
        let got = self.bytes.get(self.at..self.at.checked_add(len)?)?;
        self.at += len;
        Some(got)
    }
}

/// The finished attempts no later record acks, in the order they were written.
fn unacked(records: Vec<Record>) -> Vec<Unacked> {
    let mut open: HashMap<(i64, i32), usize> = HashMap::new();
    let mut kept: Vec<Option<Unacked>> = Vec::new();
    for record in records {
        match record {
            Record::Finished(u) => {
                let key = (u.event.task_instance_id, u.event.attempt);
                if let Some(old) = open.insert(key, kept.len()) {
                    kept[old] = None;
                }
                kept.push(Some(u));
            }
            Record::Acked(id, attempt) => {
                if let Some(i) = open.remove(&(id, attempt)) {
                    kept[i] = None;
                }
            }
        }
    }
    kept.into_iter().flatten().collect()
}

/// Replaces the file with `unacked` alone: a new file, fsync'd, renamed over the old one.
fn rewrite(path: &Path, unacked: &[Unacked]) -> io::Result<()> {
    let mut buf = Vec::new();
    for u in unacked {
        encode_finished(u, &mut buf);
    }
    let tmp = path.with_extension("journal.new");
    // The worker's alone: task outputs are in it.
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(&buf)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_common::proto::TaskEventKind;

    fn event(id: i64, attempt: i32) -> TaskEvent {
        TaskEvent {
            task_instance_id: id,
            attempt,
            workflow_instance_id: 9,
            kind: TaskEventKind::Success as i32,
            output: HashMap::from([("rows".to_string(), id.to_string())]),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn what_was_not_acked_comes_back_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("outbox.journal");
        let (journal, found) = Journal::open(&path).unwrap();
        assert!(found.is_empty());
        for id in 1..=3 {
            journal.finished("m:1", 4, &event(id, 1));
        }
        journal.finished("m:2", 5, &event(2, 2));
        journal.acked(1, 1);
        journal.acked(2, 1);
        journal.finished("m:1", 4, &event(4, 1));
        journal.flush().await;
        drop(journal);

        let (journal, found) = Journal::open(&path).unwrap();
        let keys: Vec<(i64, i32, &str, i64)> = found
            .iter()
            .map(|u| {
                (
                    u.event.task_instance_id,
                    u.event.attempt,
                    u.master.as_str(),
                    u.epoch,
                )
            })
            .collect();
        assert_eq!(keys, [(3, 1, "m:1", 4), (2, 2, "m:2", 5), (4, 1, "m:1", 4)]);
        assert_eq!(found[0].event.output["rows"], "3", "outputs are kept");
        journal.acked(3, 1);
        journal.acked(2, 2);
        journal.acked(4, 1);
        journal.finished("m:1", 4, &event(5, 1));
        journal.flush().await;
        drop(journal);
        let (_, found) = Journal::open(&path).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].event.task_instance_id, 5);
    }

    #[tokio::test]
    async fn the_file_is_emptied_once_it_has_grown_and_all_is_acked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("outbox.journal");
        let (journal, _) = Journal::open(&path).unwrap();
        let big = |id| {
            let mut e = event(id, 1);
            e.output.insert("blob".into(), "x".repeat(100_000));
            e
        };
        for id in 1..=50 {
            journal.finished("m:1", 1, &big(id));
        }
        for id in 1..50 {
            journal.acked(id, 1);
        }
        journal.flush().await;
        assert!(std::fs::metadata(&path).unwrap().len() > COMPACT_AT);
        drop(journal);
        let (journal, found) = Journal::open(&path).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].event, big(50));

        for id in 51..=100 {
            journal.finished("m:1", 1, &big(id));
        }
        for id in 50..=100 {
            journal.acked(id, 1);
        }
        journal.finished("m:1", 1, &event(101, 1));
        journal.acked(101, 1);
        journal.flush().await;
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "emptied");
        drop(journal);
        let (_, found) = Journal::open(&path).unwrap();
        assert!(found.is_empty());
    }

    #[test]
    fn a_torn_record_at_the_end_is_dropped_and_the_rest_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("outbox.journal");
        let mut buf = Vec::new();
        let whole = Unacked {
            master: "m:1".into(),
            epoch: 1,
            event: event(1, 1),
        };
        encode_finished(&whole, &mut buf);
        let mut torn = Vec::new();
        encode_finished(
            &Unacked {
                event: event(2, 1),
                ..whole.clone()
            },
            &mut torn,
        );
        for cut in 1..torn.len() {
            let mut bytes = buf.clone();
            bytes.extend_from_slice(&torn[..cut]);
            std::fs::write(&path, &bytes).unwrap();
            let (_, found) = Journal::open(&path).unwrap();
            assert_eq!(found, std::slice::from_ref(&whole), "cut at {cut}");
        }
        std::fs::write(&path, b"garbage").unwrap();
        let (_, found) = Journal::open(&path).unwrap();
        assert!(found.is_empty());
    }
}
