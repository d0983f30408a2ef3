/* Python's `int / int` true division in C: the correctly rounded double of the exact quotient.

   simrd scores storages with Python int / int divisions, and equal doubles tie: ties decide
   runs, so the C runtime must produce the very same double. Operands up to 2**53 are exact
   doubles and one IEEE division rounds correctly. Otherwise an 80-bit long double quotient
   (relative error < 2**-62) is rounded to double and kept only when it lies clearly inside
   that double's rounding interval; in the rare remaining case Python computes it. */
#ifndef DTR_DIVIDE_H
#define DTR_DIVIDE_H

#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>

static PyObject *u128_to_pylong(unsigned __int128 v) {
    PyObject *hi = PyLong_FromUnsignedLongLong((unsigned long long)(v >> 64));
    PyObject *lo = PyLong_FromUnsignedLongLong((unsigned long long)v);
    PyObject *shift = PyLong_FromLong(64);
    PyObject *out = NULL;
    if (hi && lo && shift) {
        PyObject *shifted = PyNumber_Lshift(hi, shift);
        if (shifted) {
            out = PyNumber_Or(shifted, lo);
            Py_DECREF(shifted);
        }
    }
    Py_XDECREF(hi);
    Py_XDECREF(lo);
    Py_XDECREF(shift);
    return out;
}

/* A non-negative Python int below 2**128, through the public API (any Python version). */
static int pylong_to_u128(PyObject *value, unsigned __int128 *out) {
    PyObject *mask = PyLong_FromUnsignedLongLong(~0ull);
    PyObject *shift = PyLong_FromLong(64);
    PyObject *low = mask ? PyNumber_And(value, mask) : NULL;
    PyObject *high = shift ? PyNumber_Rshift(value, shift) : NULL;
    int rc = -1;
    if (low && high) {
        unsigned long long lo = PyLong_AsUnsignedLongLong(low);
        unsigned long long hi = PyErr_Occurred() ? 0 : PyLong_AsUnsignedLongLong(high);
        if (!PyErr_Occurred()) {
            *out = ((unsigned __int128)hi << 64) | lo;
            rc = 0;
        }
    }
    Py_XDECREF(mask);
    Py_XDECREF(shift);
    Py_XDECREF(low);
    Py_XDECREF(high);
    return rc;
}

/* 0 on success (quotient in *out), -1 with a Python error set. num >= 0, den > 0. */
static int true_divide(int64_t num, unsigned __int128 den, double *out) {
    const unsigned __int128 exact = (unsigned __int128)1 << DBL_MANT_DIG;
    if (num >= 0 && (unsigned __int128)num <= exact && den <= exact) {
        *out = (double)num / (double)(unsigned long long)den;
        return 0;
    }
#if LDBL_MANT_DIG >= 64
    if (num >= 0) {
        long double q = (long double)num / (long double)den;
        double d = (double)q;
        if (isfinite(d) && d > 0) {
            long double below = ((long double)d + (long double)nextafter(d, 0.0)) / 2;
            long double above = ((long double)d + (long double)nextafter(d, INFINITY)) / 2;
            long double margin = q * 0x1p-58L;
            if (q - below > margin && above - q > margin) {
                *out = d;
                return 0;
            }
        }
    }
#endif
    PyObject *n = PyLong_FromLongLong(num);
    PyObject *m = u128_to_pylong(den);
    PyObject *q = (n && m) ? PyNumber_TrueDivide(n, m) : NULL;
    Py_XDECREF(n);
    Py_XDECREF(m);
    if (!q) return -1;
    *out = PyFloat_AsDouble(q);
    Py_DECREF(q);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

#endif
