"""Every component id of the dashboard, in one place, prefixed by its page.

Pattern-matching ids (dicts) use a `type` from here, so two pages never collide.
"""

# The app's frame (app/server.py)
EXPORT_DONE = "export-done"  # the in-browser export callback's output
EXPORT_IN_BROWSER = "export-in-browser"  # pattern: {type, graph, format, file, width, height}

# Overview (/)
HOME_POLICY = "home-policy"
HOME_STRIPS = "home-strips"
HOME_INTERVAL = "home-interval"
HOME_FINGERPRINT = "home-fingerprint"
HOME_WALKING = "home-walking"  # the walks running on the store now
HOME_LOCATION = "home-location"
HOME_STRIP = "home-strip"  # pattern: {"type": HOME_STRIP, "trace": name}
HOME_CARD = "home-card"  # pattern: a card built after the page, in a request of its own
HOME_CARD_REQUEST = "home-card-request"  # pattern: what that request builds
HOME_CARD_ASK_AGAIN = "home-card-ask-again"  # pattern: asks again if that request is lost

# Trace page (/trace/<name>)
TRACE_NAME = "trace-name"
TRACE_POLICY = "trace-policy"
TRACE_SUMMARY = "trace-summary"
TRACE_STRIP = "trace-strip"
TRACE_PINNED = "trace-pinned"
TRACE_DEPTH_MODE = "trace-depth-mode"
TRACE_OVERHEAD = "trace-overhead"
TRACE_HOLES = "trace-holes"
TRACE_EXACT_HOLES = "trace-exact-holes"
TRACE_EXPORTS = "trace-exports"
TRACE_INTERVAL = "trace-interval"
TRACE_ASK_AGAIN = "trace-ask-again"  # a pending page's request for its views lost: again
TRACE_FINGERPRINT = "trace-fingerprint"
TRACE_LOCATION = "trace-location"
TRACE_JOBS = "trace-jobs"
TRACE_JOBS_INTERVAL = "trace-jobs-interval"  # the jobs list's own ticks, pending or not
TRACE_JOB_CANCEL = "trace-job-cancel"  # pattern: {"type": TRACE_JOB_CANCEL, "job": id}
TRACE_CANCEL_MESSAGE = "trace-cancel-message"
TRACE_CANCEL_REQUEST = "trace-cancel-request"  # {job, at}: the last cancel button clicked
# the launch form
TRACE_MODE = "trace-launch-mode"
TRACE_VALUE = "trace-launch-value"
TRACE_LIST = "trace-launch-list"
TRACE_FROM = "trace-launch-from"
TRACE_TO = "trace-launch-to"
TRACE_STEP = "trace-launch-step"
TRACE_POINTS = "trace-launch-points"
TRACE_CAP = "trace-launch-cap"
# the launch form's inputs by the field names of app/launch.py; each input's label (which the
# form hides when the mode does not read it) is the input's id + LAUNCH_FIELD
LAUNCH_INPUTS = {
    "value": TRACE_VALUE,
    "list": TRACE_LIST,
    "from": TRACE_FROM,
    "to": TRACE_TO,
    "step": TRACE_STEP,
    "points": TRACE_POINTS,
    "cap": TRACE_CAP,
}
LAUNCH_FIELD = "-field"
TRACE_LAUNCH = "trace-launch-button"
TRACE_LAUNCH_MESSAGE = "trace-launch-message"
TRACE_TOKEN = "trace-token"  # the access token, for launching and cancelling

# Run detail (/run/<run_id>)
RUN_ID = "run-id"
RUN_EVENTS = "run-events"
RUN_EVENTS_INTERVAL = "run-events-interval"
RUN_RECORD_EVENTS = "run-record-events"
RUN_RERUN = "run-rerun"
RUN_RETAIN = "run-retain"
RUN_RERUN_RETAIN = "run-rerun-retain"
RUN_MESSAGE = "run-message"
RUN_TOKEN = "run-token"
RUN_EVENT_TABLE = "run-event-table"
RUN_OPERATOR_CHART = "run-operator-chart"

# Compare (/compare?a=<run_id>&b=<run_id>)
COMPARE_PAIR = "compare-pair"
COMPARE_SHOWN = "compare-shown"
COMPARE_QUEUED = "compare-queued"  # the diverge job this page queued
COMPARE_STATUS = "compare-status"
COMPARE_CONTENT = "compare-content"
COMPARE_CHART = "compare-chart"
COMPARE_OUTCOMES = "compare-outcomes"
COMPARE_INTERVAL = "compare-interval"
COMPARE_RETRY = "compare-retry"
COMPARE_RETAIN = "compare-retain"  # pattern: {"type": COMPARE_RETAIN, "storage": id}
COMPARE_MESSAGE = "compare-message"
