/* humming.raw — the SWIG module over include/humming.h, generated from the header itself
 * (%include below), so a function added to the header appears here with no edit. The Pythonic
 * package (humming/*.py) is written on top of it; use this module directly only for what that
 * package does not cover.
 *
 * How C signatures look from Python (the rules are by type, so new functions follow them):
 *   - hm_status_t results come back as plain ints; the Pythonic layer raises humming.Error.
 *   - T **out handles and non-const scalar pointers (int32_t *, int64_t *, uint32_t *,
 *     uint64_t *, size_t *, double *, hm_dtype_t *) are outputs, appended to the result:
 *     `status, fmt = raw.hm_format_parse("w=int4 ...")`.
 *   - (char *buf, size_t size) takes the buffer size as an int and returns the text:
 *     `status, text, length = raw.hm_format_to_string(fmt, 256)`.
 *   - Data pointers (void *, float *, uint8_t *, and const pointers to numbers) are addresses
 *     passed as ints, in arguments and in struct fields alike. The caller keeps the memory alive
 *     and sized; the Pythonic layer checks dtype, size and contiguity before it passes one.
 *   - The GIL is released around every C call (-threads). Python threads are OS threads, so a
 *     failing call and the hm_last_error_message() read that follows it on the same Python
 *     thread see the same thread-local message.
 */
%module(package="humming", threads="1") raw

%{
#include <stdlib.h>
#include <string.h>
#include "humming.h"
%}

%include <stdint.i>
%include <typemaps.i>

/* The header marks exports with __attribute__((visibility("default"))); SWIG does not parse it. */
#define __attribute__(x)

/* ---- handles written through T **out: returned after the status ------------------------- */
%typemap(in, numinputs=0) SWIGTYPE **out ($*1_ltype temp = NULL) {
  $1 = &temp;
}
%typemap(argout) SWIGTYPE **out {
  $result = SWIG_AppendOutput($result, SWIG_NewPointerObj(SWIG_as_voidptr(temp$argnum),
                                                           $*1_descriptor, 0));
}

/* ---- strings written through const char **name (owned by a handle): returned as str ------ */
%typemap(in, numinputs=0) const char **name (const char *temp = NULL) {
  $1 = ($1_ltype)&temp; /* SWIG declares the argument without its const */
}
%typemap(argout) const char **name {
  PyObject *text = temp$argnum ? PyUnicode_DecodeUTF8(temp$argnum, (Py_ssize_t)strlen(temp$argnum),
                                                      "replace")
                               : (Py_INCREF(Py_None), Py_None);
  $result = SWIG_AppendOutput($result, text);
}

/* ---- scalar outputs ---------------------------------------------------------------------- */
%apply int32_t *OUTPUT { int32_t * };
%apply int64_t *OUTPUT { int64_t * };
%apply uint32_t *OUTPUT { uint32_t * };
%apply uint64_t *OUTPUT { uint64_t * };
%apply size_t *OUTPUT { size_t * };
%apply double *OUTPUT { double * };

/* ---- strings copied out by the snprintf rule --------------------------------------------- */
%typemap(in, numinputs=1) (char *buf, size_t size) {
  unsigned long long requested = PyLong_AsUnsignedLongLong($input);
  if (PyErr_Occurred()) SWIG_fail;
  $2 = (size_t)requested;
  $1 = NULL;
  if ($2 > 0) {
    $1 = (char *)calloc($2, 1);
    if ($1 == NULL) {
      PyErr_NoMemory();
      SWIG_fail;
    }
  }
}
%typemap(argout) (char *buf, size_t size) {
  size_t used = $1 != NULL ? strnlen($1, $2) : 0;
  $result = SWIG_AppendOutput($result,
                              PyUnicode_DecodeUTF8($1 != NULL ? $1 : "", used, "replace"));
}
%typemap(freearg) (char *buf, size_t size) {
  free($1);
}

/* ---- data pointers as integer addresses -------------------------------------------------- */
%define HM_ADDRESS_TYPEMAPS(TYPE)
%typemap(in) TYPE {
  $1 = ($1_ltype)PyLong_AsVoidPtr($input);
  if (PyErr_Occurred()) SWIG_fail;
}
%typemap(out) TYPE {
  $result = PyLong_FromVoidPtr((void *)$1);
}
%typemap(typecheck, precedence=SWIG_TYPECHECK_POINTER) TYPE {
  $1 = PyLong_Check($input) ? 1 : 0;
}
/* No output part: without this, `const int64_t *` would pick up int64_t *OUTPUT's. */
%typemap(argout) TYPE ""
%enddef

HM_ADDRESS_TYPEMAPS(void *)
HM_ADDRESS_TYPEMAPS(const void *)
HM_ADDRESS_TYPEMAPS(float *)
HM_ADDRESS_TYPEMAPS(const float *)
HM_ADDRESS_TYPEMAPS(uint8_t *)
HM_ADDRESS_TYPEMAPS(const uint8_t *)
HM_ADDRESS_TYPEMAPS(const int32_t *)
HM_ADDRESS_TYPEMAPS(const int64_t *)
HM_ADDRESS_TYPEMAPS(const uint32_t *)
HM_ADDRESS_TYPEMAPS(const uint64_t *)
HM_ADDRESS_TYPEMAPS(hm_convert_progress_fn)
HM_ADDRESS_TYPEMAPS(hm_convert_model_progress_fn)
HM_ADDRESS_TYPEMAPS(hm_convert_cancel_fn)

/* ---- fixed-size integer arrays in structs (hm_checkpoint_tensor_t.shape) as tuples -------- */
%typemap(in) int64_t [ANY] (int64_t temp[$1_dim0]) {
  PyObject *seq = PySequence_Fast($input, "expected a sequence of integers");
  if (seq == NULL) SWIG_fail;
  Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
  if (count > $1_dim0) {
    Py_DECREF(seq);
    PyErr_Format(PyExc_ValueError, "at most %d values, got %zd", (int)$1_dim0, count);
    SWIG_fail;
  }
  memset(temp, 0, sizeof(temp));
  for (Py_ssize_t i = 0; i < count; ++i) {
    temp[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
  }
  Py_DECREF(seq);
  if (PyErr_Occurred()) SWIG_fail;
  $1 = temp;
}
%typemap(memberin) int64_t [ANY] {
  memcpy($1, $input, sizeof($1_type));
}
%typemap(out) int64_t [ANY] {
  $result = PyTuple_New($1_dim0);
  for (Py_ssize_t i = 0; i < $1_dim0; ++i) {
    PyTuple_SET_ITEM($result, i, PyLong_FromLongLong($1[i]));
  }
}

/* ---- arrays of structs: (tensors, count) takes a Python sequence of structs --------------- */
/* The structs are copied into a C array for the call; the strings and data they point to stay
 * owned by the Python objects, which the sequence keeps alive until the call returns. */
%typemap(in) (const hm_checkpoint_tensor_t *tensors, size_t count) ($*1_ltype *array = NULL, PyObject *seq = NULL) {
  seq = PySequence_Fast($input, "expected a sequence of $*1_ltype");
  if (seq == NULL) SWIG_fail;
  Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
  array = ($*1_ltype *)calloc(count > 0 ? (size_t)count : 1, sizeof($*1_ltype));
  if (array == NULL) {
    PyErr_NoMemory();
    SWIG_fail;
  }
  for (Py_ssize_t i = 0; i < count; ++i) {
    void *item = NULL;
    int res = SWIG_ConvertPtr(PySequence_Fast_GET_ITEM(seq, i), &item, $1_descriptor, 0);
    if (!SWIG_IsOK(res) || item == NULL) {
      PyErr_Format(PyExc_TypeError, "item %zd is not a $*1_ltype", i);
      SWIG_fail;
    }
    array[i] = *($*1_ltype *)item;
  }
  $1 = array;
  $2 = (size_t)count;
}
%typemap(freearg) (const hm_checkpoint_tensor_t *tensors, size_t count) {
  free(array$argnum);
  Py_XDECREF(seq$argnum);
}

/* ---- arrays of handles: (layers, count) takes a Python sequence of handles ------------------ */
/* The handles are copied into a C array of pointers for the call; the objects stay Python's. */
%typemap(in) (const hm_converted_layer_t *const *layers, size_t count) (hm_converted_layer_t **array = NULL, PyObject *seq = NULL) {
  seq = PySequence_Fast($input, "expected a sequence of hm_converted_layer_t handles");
  if (seq == NULL) SWIG_fail;
  Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
  array = (hm_converted_layer_t **)calloc(count > 0 ? (size_t)count : 1, sizeof(*array));
  if (array == NULL) {
    PyErr_NoMemory();
    SWIG_fail;
  }
  for (Py_ssize_t i = 0; i < count; ++i) {
    void *item = NULL;
    int res = SWIG_ConvertPtr(PySequence_Fast_GET_ITEM(seq, i), &item,
                              SWIGTYPE_p_hm_converted_layer, 0);
    if (!SWIG_IsOK(res)) {
      PyErr_Format(PyExc_TypeError, "item %zd is not an hm_converted_layer_t handle", i);
      SWIG_fail;
    }
    array[i] = (hm_converted_layer_t *)item;
  }
  $1 = ($1_ltype)array; /* SWIG declares the argument without its consts */
  $2 = (size_t)count;
}
%typemap(freearg) (const hm_converted_layer_t *const *layers, size_t count) {
  free(array$argnum);
  Py_XDECREF(seq$argnum);
}

/* ---- const char * fields of option structs: owned copies ---------------------------------- */
/* SWIG's default setter copies the string and never frees it; these free the previous copy.
 * A field keeps NULL until set, because every struct is filled by its _init() function first. */
%typemap(memberin) const char * {
  free((char *)$1);
  if ($input != NULL) {
    size_t bytes = strlen($input) + 1;
    char *copy = (char *)malloc(bytes);
    if (copy == NULL) {
      PyErr_NoMemory();
      SWIG_fail;
    }
    memcpy(copy, $input, bytes);
    $1 = copy;
  } else {
    $1 = NULL;
  }
}

/* ---- dtype constants ---------------------------------------------------------------------- */
/* HM_DTYPE_F16 and friends expand to casts SWIG cannot evaluate; the C compiler does it here.
 * tests/bindings/check_coverage.py fails when the header gains one that is not listed. */
%constant hm_dtype_t HM_DTYPE_NONE = HM_DTYPE_NONE;
%constant hm_dtype_t HM_DTYPE_F32 = HM_DTYPE_F32;
%constant hm_dtype_t HM_DTYPE_F16 = HM_DTYPE_F16;
%constant hm_dtype_t HM_DTYPE_BF16 = HM_DTYPE_BF16;
%constant hm_dtype_t HM_DTYPE_E4M3 = HM_DTYPE_E4M3;
%constant hm_dtype_t HM_DTYPE_E5M2 = HM_DTYPE_E5M2;
%constant hm_dtype_t HM_DTYPE_E2M1 = HM_DTYPE_E2M1;
%constant hm_dtype_t HM_DTYPE_UE8M0 = HM_DTYPE_UE8M0;
%constant hm_dtype_t HM_DTYPE_INT8 = HM_DTYPE_INT8;
%constant hm_dtype_t HM_DTYPE_INT4 = HM_DTYPE_INT4;
%constant hm_dtype_t HM_DTYPE_UINT4 = HM_DTYPE_UINT4;
%constant hm_dtype_t HM_DTYPE_UINT4B8 = HM_DTYPE_UINT4B8;
%constant hm_dtype_t HM_DTYPE_UINT8 = HM_DTYPE_UINT8;

/* Structs with such fields free the copies when Python drops them. */
%extend hm_context_options {
  ~hm_context_options() {
    free((char *)$self->target_arch);
    free((char *)$self->cache_dir);
    free($self);
  }
}
%extend hm_plan_options {
  ~hm_plan_options() {
    free((char *)$self->tuning_json);
    free($self);
  }
}
%extend hm_convert_model_options {
  ~hm_convert_model_options() {
    free((char *)$self->scheme);
    free($self);
  }
}
%extend hm_checkpoint_tensor {
  ~hm_checkpoint_tensor() {
    free((char *)$self->name);
    free((char *)$self->dtype);
    free($self);
  }
}

%include "humming.h"
