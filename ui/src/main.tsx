import { QueryClientProvider } from "@tanstack/react-query";
import { StrictMode, Suspense, lazy, useEffect, useSyncExternalStore } from "react";
import { createRoot } from "react-dom/client";
import { queryClient } from "./api/cache";
import { connection } from "./api/client";
import { useSession } from "./api/session";
import { Layout } from "./components/Layout";
import { currentProject } from "./project";
import { match, navigate, path, useLocation } from "./router";
import { AccountPage } from "./pages/AccountPage";
import { AuditPage } from "./pages/AuditPage";
import { ClusterPage } from "./pages/ClusterPage";
import { InstancePage } from "./pages/InstancePage";
import { InstancesPage } from "./pages/InstancesPage";
import { NotFound } from "./pages/NotFound";
import { ProjectPage } from "./pages/ProjectPage";
import { ProjectsPage } from "./pages/ProjectsPage";
import { SignIn } from "./pages/SignIn";
import { UsersPage } from "./pages/UsersPage";
import { WorkflowPage } from "./pages/WorkflowPage";
import { WorkflowsPage } from "./pages/WorkflowsPage";
import "./styles.css";

// The editor pulls in CodeMirror; only pages that edit load it.
const EditorPage = lazy(() => import("./pages/EditorPage"));

function Routes() {
  const { path: here } = useLocation();
  const session = useSession();
  // `/` opens the last project chosen, if the caller may see it, else one they may.
  useEffect(() => {
    if ((here !== "/" && here !== "") || !session) return;
    const remembered = currentProject();
    const visible = !session.auth || session.admin || remembered in session.roles;
    const project = visible ? remembered : Object.keys(session.roles).sort()[0];
    navigate(project ? path.workflows(project) : "/projects", true);
  }, [here, session]);
  let m: Record<string, string> | null;
  if ((m = match("/projects/:project/workflows", here))) return <WorkflowsPage project={m.project} />;
  if ((m = match("/projects/:project/workflows/new", here))) return <EditorPage project={m.project} />;
  if ((m = match("/projects/:project/workflows/:name/edit", here)))
    return <EditorPage project={m.project} name={m.name} />;
  if ((m = match("/projects/:project/workflows/:name", here)))
    return <WorkflowPage project={m.project} name={m.name} tab="overview" />;
  if (
    (m = match("/projects/:project/workflows/:name/:tab", here)) &&
    ["schedule", "backfill", "triggers", "runs"].includes(m.tab)
  )
    return (
      <WorkflowPage project={m.project} name={m.name} tab={m.tab as "schedule" | "backfill" | "triggers" | "runs"} />
    );
  if (match("/instances", here)) return <InstancesPage />;
  if ((m = match("/instances/:id", here)) && /^\d+$/.test(m.id)) return <InstancePage id={Number(m.id)} />;
  if (match("/cluster", here)) return <ClusterPage />;
  if (match("/projects", here)) return <ProjectsPage />;
  if ((m = match("/projects/:project", here))) return <ProjectPage project={m.project} />;
  if (match("/users", here)) return <UsersPage />;
  if (match("/account", here)) return <AccountPage />;
  if (match("/audit", here)) return <AuditPage />;
  if (here === "/") return null;
  return <NotFound />;
}

function App() {
  // The session's query (useSession, below) asks whether this server wants a token: a
  // 401 flips the gate to sign-in.
  const signIn = useSyncExternalStore(connection.subscribe, () => connection.signInNeeded);
  if (signIn) return <SignIn />;
  return (
    <Layout>
      <Suspense fallback={<p className="muted">Loading…</p>}>
        <Routes />
      </Suspense>
    </Layout>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <QueryClientProvider client={queryClient}>
      <App />
    </QueryClientProvider>
  </StrictMode>,
);
