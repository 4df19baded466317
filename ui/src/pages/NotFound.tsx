import { Link, useTitle } from "../router";

export function NotFound() {
  useTitle("Not found");
  return (
    <div className="card">
      <h1>Page not found</h1>
      <p>
        There is no page at <code>{location.pathname}</code>. Go to the <Link href="/">workflows</Link>.
      </p>
    </div>
  );
}
