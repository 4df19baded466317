//! Names in a definition brought to NFC ([`super::name::normalize`]) before validation, so
//! that a name typed with a decomposed accent and a reference typed with the composed one
//! (or the other way round) are the same name. Only names and references to names: a
//! command, script or parameter value is the user's text and stays as written.

use super::name::normalize;
use super::{TaskDef, WorkflowDef};

fn nfc(s: &mut String) {
    if !s.is_ascii() {
        *s = normalize(s);
    }
}

fn nfc_opt(s: &mut Option<String>) {
    if let Some(s) = s {
        nfc(s);
    }
}

impl WorkflowDef {
    pub(super) fn normalize_names(&mut self) {
        nfc(&mut self.name);
        nfc(&mut self.project);
        self.alerts.iter_mut().for_each(|a| nfc(&mut a.channel));
        nfc_opt(&mut self.environment);
        if let Some(h) = &mut self.on_failure {
            nfc(&mut h.workflow);
            nfc_opt(&mut h.project);
        }
        self.triggers.iter_mut().for_each(|t| nfc(&mut t.name));
        self.tasks.iter_mut().for_each(TaskDef::normalize_names);
    }
}

impl TaskDef {
    fn normalize_names(&mut self) {
        nfc(&mut self.name);
        self.depends_on.iter_mut().for_each(nfc);
        nfc_opt(&mut self.task_group);
        nfc_opt(&mut self.environment);
        nfc_opt(&mut self.on_timeout);
        self.alerts.iter_mut().for_each(|a| nfc(&mut a.channel));
        if let Some(e) = &mut self.on_error {
            nfc_opt(&mut e.then);
        }
        if let Some(c) = &mut self.conditions {
            c.success.iter_mut().chain(&mut c.failure).for_each(nfc);
        }
        if let Some(s) = &mut self.switch {
            s.cases.iter_mut().for_each(|c| nfc(&mut c.then));
            nfc_opt(&mut s.default);
        }
        if let Some(s) = &mut self.sub_workflow {
            nfc(&mut s.workflow);
            nfc_opt(&mut s.project);
        }
        if let Some(d) = &mut self.dependent {
            nfc_opt(&mut d.workflow);
            nfc_opt(&mut d.project);
            nfc_opt(&mut d.task);
            for item in d.groups.iter_mut().flat_map(|g| &mut g.items) {
                nfc(&mut item.workflow);
                nfc_opt(&mut item.project);
                nfc_opt(&mut item.task);
            }
        }
        if let Some(f) = &mut self.foreach {
            nfc_opt(&mut f.workflow);
            nfc_opt(&mut f.project);
            if let Some(t) = &mut f.task {
                t.normalize_names();
            }
        }
        if let Some(d) = &mut self.do_while {
            d.tasks.iter_mut().for_each(TaskDef::normalize_names);
        }
    }
}
