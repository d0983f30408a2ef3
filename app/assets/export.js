// Chart exports in the browser: PNG and SVG of a chart as it is on the screen (the reader's
// zoom included), drawn by Plotly itself at the size the server uses for files. PDF has no
// browser-side writer in Plotly: that link goes to the server (/export, app/figures.py).
//
// dcc.Graph loads Plotly and draws the chart asynchronously, after the page (and its export
// buttons) are on the screen. A click in between is kept: the download starts once the chart
// is drawn (WAIT_MS at most), instead of being dropped silently.
const WAIT_MS = 60000;
const POLL_MS = 100;

function drawnPlot(graph) {
    const plot = document.querySelector("#" + CSS.escape(graph) + " .js-plotly-plot");
    return plot && window.Plotly && plot._fullLayout ? plot : null;
}

function downloadWhenDrawn(id, started) {
    const plot = drawnPlot(id.graph);
    if (!plot) {
        if (Date.now() - started < WAIT_MS) {
            setTimeout(function () { downloadWhenDrawn(id, started); }, POLL_MS);
        }
        return;
    }
    window.Plotly.downloadImage(plot, {
        format: id.format,
        filename: id.file,
        width: id.width,
        height: id.height,
        scale: id.format === "png" ? 2 : 1,
    });
}

window.dash_clientside = Object.assign({}, window.dash_clientside, {
    exports: {
        download: function () {
            const context = window.dash_clientside.callback_context;
            const id = context.triggered_id;
            const clicked = context.triggered.length > 0 && context.triggered[0].value;
            if (!id || !clicked) {
                return window.dash_clientside.no_update;
            }
            downloadWhenDrawn(id, Date.now());
            return Date.now();
        },
    },
});
