//! Things a task uses and a later task can use again (work directories, record files),
//! numbered as they are made.

use std::sync::Mutex;

pub(crate) struct Reuse<T> {
    /// The ones free now, and how many were made.
    inner: Mutex<(Vec<T>, usize)>,
}

impl<T> Default for Reuse<T> {
    fn default() -> Self {
        Reuse {
            inner: Mutex::new((Vec::new(), 0)),
        }
    }
}

impl<T> Reuse<T> {
    /// A free one; else the number (from 1) of a new one for the caller to make.
    pub(crate) fn take(&self) -> Result<T, usize> {
        let mut inner = self.inner.lock().expect("reuse lock");
        match inner.0.pop() {
            Some(free) => Ok(free),
            None => {
                inner.1 += 1;
                Err(inner.1)
            }
        }
    }

    /// Gives one back for a later task.
    pub(crate) fn put(&self, free: T) {
        self.inner.lock().expect("reuse lock").0.push(free);
    }
}
