"""Generate skillaudit/demo/distractors.jsonl: names and descriptions of plausible skills from domains
unlike the bundled library's (coding puzzles and arithmetic word problems), for the catalog-size
sweep of `skillaudit triggers --distractors`. Run: python skillaudit/demo/make_distractors.py"""

import json
import random
from pathlib import Path

DOMAINS = [
    ("docker", "Docker images and containers", ["write a Dockerfile with multi-stage builds", "shrink image size", "debug a container that exits at start", "set health checks and restart policies", "pin base image digests", "run containers as a non-root user", "cache dependency layers", "inspect container logs"]),
    ("kubernetes", "Kubernetes workloads", ["write deployment manifests", "roll out and roll back releases", "configure readiness and liveness probes", "set resource requests and limits", "debug CrashLoopBackOff pods", "manage secrets and config maps", "autoscale with the HPA", "drain and cordon nodes"]),
    ("terraform", "Terraform infrastructure as code", ["structure modules and variables", "manage remote state and locking", "import existing resources", "plan safe refactors with moved blocks", "tag cloud resources consistently", "review a plan before apply"]),
    ("git", "git version control", ["resolve merge conflicts", "rewrite history with interactive rebase", "bisect a regression", "recover lost commits from the reflog", "write commit messages", "split a large pull request", "manage submodules", "sign commits"]),
    ("ci", "continuous integration pipelines", ["cache dependencies in GitHub Actions", "build a test matrix", "publish release artifacts", "gate merges on checks", "speed up slow pipelines", "store secrets safely"]),
    ("sql", "SQL databases", ["tune slow queries with EXPLAIN", "design indexes", "write window functions", "migrate a schema without downtime", "avoid N+1 queries", "normalise tables", "write recursive CTEs"]),
    ("postgres", "PostgreSQL administration", ["vacuum and analyse tables", "set up logical replication", "manage connection pooling", "back up and restore with pg_dump", "read pg_stat_statements"]),
    ("react", "React front-end development", ["manage state with hooks", "avoid unnecessary re-renders", "fetch data with suspense", "write accessible forms", "test components with Testing Library", "split bundles with lazy loading"]),
    ("css", "CSS layout and styling", ["build layouts with grid and flexbox", "write responsive media queries", "theme with custom properties", "animate with transitions", "fix stacking context issues"]),
    ("accessibility", "web accessibility", ["audit colour contrast", "label form controls", "manage keyboard focus", "use ARIA roles correctly", "write alt text for images"]),
    ("http-api", "HTTP API design", ["design REST resources and status codes", "version an API", "paginate list endpoints", "document with OpenAPI", "rate limit clients", "make requests idempotent"]),
    ("auth", "authentication and authorisation", ["implement OAuth 2 authorisation code flow", "store passwords with argon2", "rotate API keys", "validate JWTs", "add multi-factor authentication"]),
    ("security", "application security", ["threat model a feature", "prevent SQL injection", "set security headers", "scan dependencies for vulnerabilities", "handle secrets in code review"]),
    ("logging", "logging and observability", ["write structured logs", "add distributed tracing", "define SLOs and alerts", "build dashboards", "sample high-volume logs"]),
    ("pdf", "PDF documents", ["extract text and tables from PDFs", "fill PDF forms", "merge and split PDF files", "add watermarks", "OCR scanned pages"]),
    ("docx", "Word documents", ["generate reports from templates", "track changes and comments", "convert documents to PDF", "apply consistent heading styles"]),
    ("spreadsheet", "spreadsheets", ["write lookup formulas", "build pivot tables", "clean imported data", "add data validation", "chart monthly totals"]),
    ("slides", "presentation slides", ["structure a talk", "design readable slides", "add speaker notes", "export decks to PDF"]),
    ("writing", "technical writing", ["write a README", "write release notes", "edit for plain language", "write an API reference", "write a design document", "summarise meeting notes"]),
    ("email", "professional email", ["write a polite follow-up", "decline a request", "announce an outage", "write a cold outreach email"]),
    ("translation", "translation and localisation", ["localise UI strings", "handle plural forms", "translate marketing copy", "keep a glossary"]),
    ("images", "image processing", ["resize and crop images", "convert image formats", "remove backgrounds", "batch-rename photos by EXIF date", "compress images for the web"]),
    ("audio", "audio processing", ["trim and normalise audio", "transcribe speech", "convert sample rates", "remove background noise"]),
    ("video", "video editing", ["cut clips with ffmpeg", "add subtitles", "transcode for streaming", "extract frames"]),
    ("ml-training", "machine learning training", ["split data without leakage", "tune hyperparameters", "track experiments", "fine-tune a language model", "evaluate a classifier", "handle class imbalance"]),
    ("data-viz", "data visualisation", ["choose the right chart", "plot time series", "label axes and units", "make colour-blind safe palettes"]),
    ("pandas", "pandas data frames", ["merge and join frames", "reshape with pivot and melt", "parse dates and time zones", "handle missing values"]),
    ("statistics", "applied statistics", ["run an A/B test", "compute confidence intervals", "check test assumptions", "correct for multiple comparisons", "estimate sample size"]),
    ("finance", "personal and business finance", ["build a budget", "read a balance sheet", "model loan amortisation", "reconcile bank statements", "prepare an invoice"]),
    ("legal", "contracts and compliance", ["review an NDA", "summarise a privacy policy", "check GDPR obligations", "draft terms of service"]),
    ("hr", "hiring and people operations", ["write a job description", "plan an interview loop", "give structured feedback", "onboard a new hire"]),
    ("product", "product management", ["write a product requirements document", "prioritise a backlog", "run a user interview", "define success metrics"]),
    ("design", "UX design", ["sketch wireframes", "run a usability test", "write UX copy", "build a design system"]),
    ("marketing", "marketing", ["plan a launch", "write landing page copy", "run an email campaign", "analyse funnel conversion"]),
    ("support", "customer support", ["triage support tickets", "write help-centre articles", "handle an angry customer", "escalate incidents"]),
    ("incident", "incident response", ["run an incident call", "write a postmortem", "communicate status updates", "roll back a bad deploy"]),
    ("mobile", "mobile apps", ["publish to the app stores", "handle push notifications", "support offline mode", "profile app start-up time"]),
    ("rust", "Rust programming", ["fix borrow checker errors", "design error types", "write async code with tokio", "profile and benchmark"]),
    ("go", "Go programming", ["structure a Go module", "use contexts for cancellation", "write table-driven tests", "avoid goroutine leaks"]),
    ("shell", "shell scripting", ["write safe bash scripts", "parse arguments with getopts", "process text with awk and sed", "schedule jobs with cron"]),
    ("networking", "computer networking", ["debug DNS resolution", "read packet captures", "configure TLS certificates", "set up a reverse proxy"]),
    ("cloud-cost", "cloud cost management", ["find idle resources", "right-size instances", "use reserved capacity", "tag spend by team"]),
    ("research", "literature research", ["search academic papers", "summarise a paper", "manage citations", "write a related-work section"]),
    ("calendar", "scheduling", ["find a meeting time across time zones", "plan a project timeline", "track deadlines"]),
    ("travel", "travel planning", ["plan an itinerary", "compare flight options", "prepare a packing list"]),
    ("cooking", "cooking and recipes", ["plan weekly meals", "adapt a recipe for allergies", "write a shopping list"]),
]

def slug(text: str) -> str:
    out = []
    for w in text.lower().replace("/", " ").split():
        w = "".join(ch for ch in w if ch.isalnum())
        if w and w not in ("a", "an", "the", "and", "with", "for", "to", "of", "by", "on", "in", "from"):
            out.append(w)
    return "-".join(out[:4])

def main() -> None:
    rows, seen = [], set()
    for key, area, tasks in DOMAINS:
        for t in tasks:
            name = f"{key}-{slug(t)}"
            if name in seen:
                continue
            seen.add(name)
            desc = (f"{t[0].upper()}{t[1:]} ({area}): steps, checks and common mistakes. "
                    f"Use when a task asks to {t}.")
            rows.append({"name": name, "description": desc})
    random.Random(2026).shuffle(rows)
    about = ("Distractor skills for skillaudit triggers --distractors: names and descriptions only, generated by "
             "make_distractors.py from domains unlike the bundled library (coding puzzles, arithmetic word "
             "problems). Public domain (CC0).")
    out = Path(__file__).with_name("distractors.jsonl")
    out.write_text(json.dumps({"_about": about}) + "\n" + "".join(json.dumps(r) + "\n" for r in rows))
    print(f"{out}: {len(rows)} distractors")


if __name__ == "__main__":
    main()
