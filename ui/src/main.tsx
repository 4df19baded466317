import { StrictMode, Suspense, lazy, useEffect, useSyncExternalStore } from "react";
import { createRoot } from "react-dom/client";
import { connection, request } from "./api/client";
import { Layout } from "./components/Layout";
import { currentProject } from "./project";
import { match, navigate, path, useLocation } from "./router";
import { ClusterPage } from "./pages/ClusterPage";
import { InstancePage } from "./pages/InstancePage";
import { InstancesPage } from "./pages/InstancesPage";
import { NotFound } from "./pages/NotFound";
import { SignIn } from "./pages/SignIn";
import { WorkflowPage } from "./pages/WorkflowPage";
import { WorkflowsPage } from "./pages/WorkflowsPage";
import "./styles.css";

// The editor pulls in CodeMirror; only pages that edit load it.
const EditorPage = lazy(() => import("./pages/EditorPage"));

function Routes() {
  const { path: here } = useLocation();
  useEffect(() => {
    if (here === "/" || here === "") navigate(path.workflows(currentProject()), true);
  }, [here]);
  let m: Record<string, string> | null;
  if ((m = match("/projects/:project/workflows", here))) return <WorkflowsPage project={m.project} />;
  if ((m = match("/projects/:project/workflows/new", here))) return <EditorPage project={m.project} />;
  if ((m = match("/projects/:project/workflows/:name/edit", here)))
    return <EditorPage project={m.project} name={m.name} />;
  if ((m = match("/projects/:project/workflows/:name", here)))
    return <WorkflowPage project={m.project} name={m.name} tab="overview" />;
  if ((m = match("/projects/:project/workflows/:name/:tab", here)) && ["schedule", "backfill", "runs"].includes(m.tab))
    return <WorkflowPage project={m.project} name={m.name} tab={m.tab as "schedule" | "backfill" | "runs"} />;
  if (match("/instances", here)) return <InstancesPage />;
  if ((m = match("/instances/:id", here)) && /^\d+$/.test(m.id)) return <InstancePage id={Number(m.id)} />;
  if (match("/cluster", here)) return <ClusterPage />;
  if (here === "/") return null;
  return <NotFound />;
}

function App() {
  const signIn = useSyncExternalStore(connection.subscribe, () => connection.signInNeeded);
  // Ask once whether this server wants a token; a 401 flips the gate to sign-in.
  useEffect(() => {
    request("/session").catch(() => undefined);
  }, []);
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
    <App />
  </StrictMode>,
);
