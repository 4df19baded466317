//! Users, tokens, projects with members, and the audit log.

use super::*;
use shoal_common::access::{Role, token_hash};

/// Whether `token` is accepted now.
async fn valid(store: &Store, token: &str) -> bool {
    store
        .token_owner(&token_hash(token))
        .await
        .unwrap()
        .is_some()
}

pub(crate) async fn the_first_admin_is_created_once_and_tokens_stop_when_revoked_expired_or_disabled(
    ctx: Ctx,
) {
    let store = ctx.store.clone();
    let (a, b) = (token_hash("first"), token_hash("second"));
    let (one, two) = tokio::join!(store.bootstrap_admin(&a), store.bootstrap_admin(&b));
    assert!(
        one.unwrap() ^ two.unwrap(),
        "exactly one start creates the admin"
    );
    let winner = if store.token_owner(&a).await.unwrap().is_some() {
        a
    } else {
        b
    };
    assert!(!store.bootstrap_admin(&token_hash("third")).await.unwrap());
    let owner = store.token_owner(&winner).await.unwrap().unwrap();
    assert_eq!((owner.user.as_str(), owner.admin), (BOOTSTRAP_ADMIN, true));

    store.create_user("ann", false).await.unwrap();
    let dup = store.create_user("ann", true).await.unwrap_err();
    assert!(matches!(dup, Error::Conflict(_)), "{dup}");
    let id = store
        .create_token("ann", "ci", &token_hash("ann-ci"), None)
        .await
        .unwrap();
    let dup = store
        .create_token("ann", "ci", &token_hash("x"), None)
        .await
        .unwrap_err();
    assert!(matches!(dup, Error::Conflict(_)), "{dup}");
    let nobody = store
        .create_token("bob", "ci", &token_hash("y"), None)
        .await
        .unwrap_err();
    assert!(matches!(nobody, Error::NotFound(_)), "{nobody}");

    // Its use is noted; it stops when its user is disabled, and comes back when enabled.
    let ann = store
        .token_owner(&token_hash("ann-ci"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((ann.user.as_str(), ann.admin), ("ann", false));
    let listed = store.list_tokens(Some("ann")).await.unwrap();
    assert!(listed[0].last_used_at.is_some(), "{listed:?}");
    store.set_user_disabled("ann", true).await.unwrap().unwrap();
    assert!(!valid(&store, "ann-ci").await);
    store
        .set_user_disabled("ann", false)
        .await
        .unwrap()
        .unwrap();
    assert!(valid(&store, "ann-ci").await);
    assert!(
        store
            .set_user_disabled("bob", true)
            .await
            .unwrap()
            .is_none()
    );

    // Revoked: only by its owner's name or by anyone's (None).
    assert!(
        store
            .revoke_token(id, Some("admin"))
            .await
            .unwrap()
            .is_none()
    );
    let revoked = store.revoke_token(id, Some("ann")).await.unwrap().unwrap();
    assert!(revoked.revoked_at.is_some());
    assert!(!valid(&store, "ann-ci").await);

    let past = now_ms() - 1;
    store
        .create_token("ann", "old", &token_hash("old"), Some(past))
        .await
        .unwrap();
    assert!(!valid(&store, "old").await);
    let later = now_ms() + 60_000;
    store
        .create_token("ann", "new", &token_hash("new"), Some(later))
        .await
        .unwrap();
    assert!(valid(&store, "new").await);
}

pub(crate) async fn projects_hold_members_and_are_deleted_only_when_empty(ctx: Ctx) {
    let store = ctx.store.clone();
    store.create_user("ann", false).await.unwrap();
    let p = store
        .create_project("p", "the p", "ann", Some("ann"))
        .await
        .unwrap();
    assert_eq!((p.created_by.as_str(), p.workflows), ("ann", 0));
    let dup = store
        .create_project("p", "", "bob", None)
        .await
        .unwrap_err();
    assert!(matches!(dup, Error::Conflict(_)), "{dup}");
    let members = store.list_members("p").await.unwrap();
    assert_eq!(
        members,
        [MemberRow {
            user: "ann".into(),
            role: Role::Admin
        }]
    );
    store.set_member("p", "ann", Role::Viewer).await.unwrap();
    store
        .create_token("ann", "t", &token_hash("ann"), None)
        .await
        .unwrap();
    let ann = store
        .token_owner(&token_hash("ann"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(ann.roles, [("p".to_string(), Role::Viewer)]);
    let ghost = store
        .set_member("p", "ghost", Role::Viewer)
        .await
        .unwrap_err();
    assert!(matches!(ghost, Error::NotFound(_)), "{ghost}");
    let nowhere = store
        .set_member("q", "ann", Role::Viewer)
        .await
        .unwrap_err();
    assert!(matches!(nowhere, Error::NotFound(_)), "{nowhere}");

    // A workflow applied to a project creates it; one with workflows stays.
    store
        .put_definition(&workflow("q", "etl", ""))
        .await
        .unwrap();
    assert_eq!(store.get_project("q").await.unwrap().unwrap().workflows, 1);
    let busy = store.delete_project("q").await.unwrap_err();
    assert!(matches!(busy, Error::Conflict(_)), "{busy}");
    assert!(store.delete_project("p").await.unwrap());
    assert!(!store.delete_project("p").await.unwrap());
    assert!(
        store.list_members("p").await.unwrap().is_empty(),
        "members go with it"
    );

    // The project of what a command became.
    let cmd = store.insert_command(&command("q", "etl", 1)).await.unwrap();
    assert_eq!(
        store
            .project_of(Owned::Command(cmd))
            .await
            .unwrap()
            .as_deref(),
        Some("q")
    );
    let inst = store
        .claim_commands("m", 1, 10)
        .await
        .unwrap()
        .remove(0)
        .instance;
    assert_eq!(
        store
            .project_of(Owned::Command(cmd))
            .await
            .unwrap()
            .as_deref(),
        Some("q"),
        "after its claim"
    );
    assert_eq!(
        store
            .project_of(Owned::Instance(inst.id))
            .await
            .unwrap()
            .as_deref(),
        Some("q")
    );
    assert_eq!(store.project_of(Owned::Instance(999)).await.unwrap(), None);
}

fn entry(action: &str) -> AuditEntry {
    AuditEntry {
        actor: "ann".into(),
        action: action.into(),
        target: format!("POST /api/v1/{action}"),
        project: Some("p".into()),
        object: None,
        address: "10.0.0.1".into(),
    }
}

pub(crate) async fn a_mutation_and_its_audit_row_commit_together(ctx: Ctx) {
    let store = ctx.store.clone();
    // Committed: the change and its row (once, however many commits follow).
    let (created, written, _) = audited(entry("createUser"), async {
        store.create_user("ann", false).await.unwrap();
        store.create_user("bob", false).await.unwrap();
    })
    .await;
    let () = created;
    assert!(written.is_some());
    // Rolled back: neither.
    let (refused, written, _) = audited(entry("createUser"), store.create_user("ann", false)).await;
    assert!(refused.is_err() && written.is_none());
    // Committed, then failed: its row says how it ended.
    let (_, written, _) = audited(entry("disableUser"), store.create_user("dee", false)).await;
    store
        .set_audit_result(written.unwrap(), "500: internal error")
        .await
        .unwrap();
    store
        .record_audit(&entry("deleteProject"), "409: still has workflows")
        .await
        .unwrap();

    let rows = store
        .list_audit(&AuditFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    let seen: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.action.as_str(), r.result.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("deleteProject", "409: still has workflows"),
            ("disableUser", "500: internal error"),
            ("createUser", "ok")
        ]
    );
    assert_eq!(rows[2].address, "10.0.0.1");
    let filtered = AuditFilter {
        action: Some("createUser".into()),
        before: Some(rows[0].id),
        limit: 10,
        ..Default::default()
    };
    assert_eq!(store.list_audit(&filtered).await.unwrap().len(), 1);
    // Outside an audited mutation, commits write no rows.
    store.create_user("cy", false).await.unwrap();
    let all = AuditFilter {
        limit: 10,
        ..Default::default()
    };
    assert_eq!(store.list_audit(&all).await.unwrap().len(), 3);
}

pub(crate) async fn secrets_are_kept_sealed_per_project(ctx: Ctx) {
    let store = ctx.store.clone();
    assert!(
        store
            .put_secret("default", "db", "sealed-1", "the db", "ann")
            .await
            .unwrap()
    );
    assert!(
        !store
            .put_secret("default", "db", "sealed-2", "", "bob")
            .await
            .unwrap()
    );
    let missing = store
        .put_secret("nowhere", "db", "x", "", "ann")
        .await
        .unwrap_err();
    assert!(matches!(missing, Error::NotFound(_)), "{missing}");
    let listed = store.list_secrets("default").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].name.as_str(), listed[0].updated_by.as_str()),
        ("db", "bob")
    );
    assert!(listed[0].updated_at >= listed[0].created_at);
    let sealed = store.sealed_secrets().await.unwrap();
    assert_eq!(
        sealed,
        [SealedSecret {
            project: "default".into(),
            name: "db".into(),
            sealed: "sealed-2".into()
        }]
    );
    assert!(store.delete_secret("default", "db").await.unwrap());
    assert!(!store.delete_secret("default", "db").await.unwrap());
    assert!(store.sealed_secrets().await.unwrap().is_empty());
}

pub(crate) async fn an_environment_is_kept_per_project_and_not_deleted_while_used(ctx: Ctx) {
    let store = ctx.store.clone();
    let config = "export JAVA_HOME=/opt/jdk17\nsource /opt/venv/bin/activate";
    assert!(
        store
            .put_environment("default", "jdk", "echo old", "java", "ann")
            .await
            .unwrap()
    );
    assert!(
        !store
            .put_environment("default", "jdk", config, "java 17", "bob")
            .await
            .unwrap()
    );
    let missing = store
        .put_environment("nowhere", "jdk", config, "", "ann")
        .await
        .unwrap_err();
    assert!(matches!(missing, Error::NotFound(_)), "{missing}");
    let got = store
        .get_environment("default", "jdk")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            got.config.as_str(),
            got.description.as_str(),
            got.updated_by.as_str()
        ),
        (config, "java 17", "bob")
    );
    let listed = store.list_environments("default").await.unwrap();
    assert_eq!(listed, store.all_environments().await.unwrap());
    assert_eq!(listed, [got]);
    assert_eq!(
        store
            .missing_environments("default", &["jdk", "py"])
            .await
            .unwrap(),
        ["py"]
    );

    // A workflow's latest version names it: kept, the workflow named.
    let uses = |v: &str| {
        WorkflowDef::parse(&format!(
            "name: build\ntasks:\n- {{name: a, type: shell, command: 'true'{v}}}\n"
        ))
        .unwrap()
    };
    store
        .put_definition(&uses(", environment: jdk"))
        .await
        .unwrap();
    assert_eq!(
        store.delete_environment("default", "jdk").await.unwrap(),
        EnvironmentDelete::InUse(vec!["build".into()])
    );
    // Its latest version no longer does.
    store.put_definition(&uses("")).await.unwrap();
    assert_eq!(
        store.delete_environment("default", "jdk").await.unwrap(),
        EnvironmentDelete::Deleted
    );
    assert_eq!(
        store.delete_environment("default", "jdk").await.unwrap(),
        EnvironmentDelete::Missing
    );
    assert!(store.all_environments().await.unwrap().is_empty());
}

pub(crate) async fn a_child_run_in_another_project_needs_its_starters_role_there_now(ctx: Ctx) {
    let store = &ctx.store;
    let ann = store.create_user("ann", false).await.unwrap();
    for (project, name) in [("q", "kid"), ("p", "parent")] {
        store
            .put_definition(&workflow(project, name, ""))
            .await
            .unwrap();
    }
    store.set_member("q", "ann", Role::Operator).await.unwrap();
    let mut start = command("p", "parent", 1);
    start.options.started_by = Some(ann.id);
    store.insert_command(&start).await.unwrap();
    let parent = store
        .claim_commands("m1", 7, 10)
        .await
        .unwrap()
        .remove(0)
        .instance;
    assert_eq!(parent.options.started_by, Some(ann.id));
    let tasks = WriteBatch {
        new_tasks: vec![new_task(&parent, "one"), new_task(&parent, "two")],
        epochs: vec![(parent.id, parent.owner_epoch)],
        ..Default::default()
    };
    let ids = store.write_batch(&tasks).await.unwrap().new_task_ids;
    let start_child = |parent_task_id| WriteBatch {
        children: vec![ChildStart {
            parent_instance_id: parent.id,
            parent_task_id,
            project: "q".into(),
            workflow: "kid".into(),
            params: Params::new(),
            priority: Priority::Medium,
            schedule_time: None,
            options: StartOptions::default(),
        }],
        epochs: vec![(parent.id, parent.owner_epoch)],
        ..Default::default()
    };
    // An operator of q: the child starts, in ann's name too.
    store.write_batch(&start_child(ids[0])).await.unwrap();
    let child = store
        .claim_commands("m1", 7, 10)
        .await
        .unwrap()
        .remove(0)
        .instance;
    assert_eq!(
        (child.project.as_str(), child.options.started_by),
        ("q", Some(ann.id))
    );
    // No longer: the next child is refused, and its task learns why.
    store.set_member("q", "ann", Role::Viewer).await.unwrap();
    store.write_batch(&start_child(ids[1])).await.unwrap();
    assert!(store.claim_commands("m1", 7, 10).await.unwrap().is_empty());
    assert_eq!(
        store.children(&[ids[1]]).await.unwrap(),
        [(
            ids[1],
            ChildState::Failed(
                "sub-workflow 'q/kid' was not started: user 'ann' who started it needs the \
                 operator role in project 'q' (has viewer); a project admin can grant it"
                    .into()
            )
        )]
    );
}
