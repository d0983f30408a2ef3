/* Evicted-neighbourhood search in C: the one hot loop of the DTR runtime.

   rebuild(adjacency, material, compute, base) walks from `base` through storages that are
   not resident (material[u] == 0) along `adjacency` (a list of lists of storage ids) and
   returns (interior, frontier, compute_sum): the evicted storages reached, the resident
   storages bordering them (base excluded), and the sum of compute over the interior.
   It is the same search as engine.runtime.Simulation._rebuild_py, which stays the
   reference implementation; tests run both. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static uint32_t *interior_mark = NULL;
static Py_ssize_t mark_capacity = 0;
static uint32_t stamp = 0;
static Py_ssize_t *stack = NULL;
static Py_ssize_t stack_capacity = 0;

static int ensure_marks(Py_ssize_t n) {
    if (n <= mark_capacity) return 0;
    uint32_t *grown = (uint32_t *)PyMem_Realloc(interior_mark, sizeof(uint32_t) * n);
    if (grown == NULL) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = mark_capacity; i < n; i++) grown[i] = 0;
    interior_mark = grown;
    mark_capacity = n;
    return 0;
}

static int push(Py_ssize_t *top, Py_ssize_t value) {
    if (*top >= stack_capacity) {
        Py_ssize_t cap = stack_capacity ? stack_capacity * 2 : 1024;
        Py_ssize_t *grown = (Py_ssize_t *)PyMem_Realloc(stack, sizeof(Py_ssize_t) * cap);
        if (grown == NULL) { PyErr_NoMemory(); return -1; }
        stack = grown;
        stack_capacity = cap;
    }
    stack[(*top)++] = value;
    return 0;
}

static PyObject *rebuild(PyObject *self, PyObject *args) {
    PyObject *adjacency, *material_obj, *compute;
    Py_ssize_t base;
    if (!PyArg_ParseTuple(args, "O!O!O!n", &PyList_Type, &adjacency, &PyByteArray_Type,
                          &material_obj, &PyList_Type, &compute, &base))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(adjacency);
    if (PyByteArray_GET_SIZE(material_obj) < n || PyList_GET_SIZE(compute) < n ||
        base < 0 || base >= n) {
        PyErr_SetString(PyExc_ValueError, "rebuild: inconsistent sizes or base out of range");
        return NULL;
    }
    const char *material = PyByteArray_AS_STRING(material_obj);
    if (ensure_marks(n) < 0) return NULL;
    stamp++;
    if (stamp == 0) {  /* wrapped: clear and restart */
        for (Py_ssize_t i = 0; i < mark_capacity; i++) interior_mark[i] = 0;
        stamp = 1;
    }
    PyObject *interior = PySet_New(NULL);
    PyObject *frontier = PySet_New(NULL);
    if (interior == NULL || frontier == NULL) goto fail;
    long long total = 0;
    Py_ssize_t top = 0;
    if (push(&top, base) < 0) goto fail;
    while (top > 0) {
        Py_ssize_t s = stack[--top];
        PyObject *edges = PyList_GET_ITEM(adjacency, s);
        Py_ssize_t m = PyList_GET_SIZE(edges);
        for (Py_ssize_t j = 0; j < m; j++) {
            PyObject *item = PyList_GET_ITEM(edges, j);
            Py_ssize_t u = PyLong_AsSsize_t(item);
            if (u == -1 && PyErr_Occurred()) goto fail;
            if (u < 0 || u >= n) {
                PyErr_SetString(PyExc_ValueError, "rebuild: storage id out of range");
                goto fail;
            }
            if (material[u]) {
                if (u != base && PySet_Add(frontier, item) < 0) goto fail;
            } else if (interior_mark[u] != stamp) {
                interior_mark[u] = stamp;
                long long c = PyLong_AsLongLong(PyList_GET_ITEM(compute, u));
                if (c == -1 && PyErr_Occurred()) goto fail;
                total += c;
                if (PySet_Add(interior, item) < 0) goto fail;
                if (push(&top, u) < 0) goto fail;
            }
        }
    }
    return Py_BuildValue("(NNL)", interior, frontier, total);
fail:
    Py_XDECREF(interior);
    Py_XDECREF(frontier);
    return NULL;
}

static PyMethodDef methods[] = {
    {"rebuild", rebuild, METH_VARARGS, "Evicted neighbourhood of base: (interior, frontier, compute)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "engine._native.regions", NULL, -1, methods};

PyMODINIT_FUNC PyInit_regions(void) { return PyModule_Create(&module); }
