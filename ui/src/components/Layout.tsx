import { useSyncExternalStore, type ReactNode } from "react";
import { connection, requireSignIn, setToken } from "../api/client";
import { useSession } from "../api/session";
import { Link, navigate, path, useLocation } from "../router";
import { currentProject } from "../project";

function useConnection() {
  const lost = useSyncExternalStore(connection.subscribe, () => connection.lost);
  return { lost };
}

/** Says so when the server stops answering; the client keeps retrying meanwhile. */
function ConnectionBanner() {
  const { lost } = useConnection();
  if (!lost) return null;
  return (
    <div className="banner" role="alert">
      Connection lost: the shoal server does not answer. Retrying…
    </div>
  );
}

/** Who is signed in, and the way out, when the server has auth. */
function Account() {
  const session = useSession();
  if (!session?.auth) return null;
  const signOut = () => {
    setToken(null);
    navigate("/", true);
    requireSignIn();
  };
  return (
    <div className="account">
      <Link href="/account" title="Your tokens and roles">
        {session.user}
        {session.admin ? " (admin)" : ""}
      </Link>
      <button type="button" className="link" onClick={signOut}>
        Sign out
      </button>
    </div>
  );
}

export function Layout({ children }: { children: ReactNode }) {
  const { path: here } = useLocation();
  const session = useSession();
  const projectPages = here === "/projects" || /^\/projects\/[^/]+$/.test(here);
  const nav = [
    {
      href: path.workflows(currentProject()),
      label: "Workflows",
      active: here.startsWith("/projects/") && !projectPages,
    },
    { href: "/instances", label: "Instances", active: here.startsWith("/instances") },
    { href: "/projects", label: "Projects", active: projectPages },
    { href: "/cluster", label: "Cluster", active: here.startsWith("/cluster") },
  ];
  if (session?.auth && session.admin) {
    nav.push({ href: "/users", label: "Users", active: here.startsWith("/users") });
    nav.push({ href: "/audit", label: "Audit", active: here.startsWith("/audit") });
  }
  return (
    <>
      <header className="topbar">
        <Link href="/" className="brand">
          shoal
        </Link>
        <nav aria-label="Main">
          {nav.map((n) => (
            <Link key={n.label} href={n.href} aria-current={n.active ? "page" : undefined}>
              {n.label}
            </Link>
          ))}
          <a href="/api/docs" target="_blank" rel="noreferrer">
            API docs
          </a>
        </nav>
        <Account />
      </header>
      <ConnectionBanner />
      <main>{children}</main>
    </>
  );
}
