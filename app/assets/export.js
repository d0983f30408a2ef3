// Chart exports in the browser: PNG and SVG of a chart as it is on the screen (the reader's
// zoom included), drawn by Plotly itself at the size the server uses for files. PDF has no
// browser-side writer in Plotly: that link goes to the server (/export, app/figures.py).
window.dash_clientside = Object.assign({}, window.dash_clientside, {
    exports: {
        download: function () {
            const context = window.dash_clientside.callback_context;
            const id = context.triggered_id;
            const clicked = context.triggered.length > 0 && context.triggered[0].value;
            if (!id || !clicked) {
                return window.dash_clientside.no_update;
            }
            const plot = document.querySelector("#" + CSS.escape(id.graph) + " .js-plotly-plot");
            if (!plot || !window.Plotly) {
                return window.dash_clientside.no_update;
            }
            window.Plotly.downloadImage(plot, {
                format: id.format,
                filename: id.file,
                width: id.width,
                height: id.height,
                scale: id.format === "png" ? 2 : 1,
            });
            return Date.now();
        },
    },
});
