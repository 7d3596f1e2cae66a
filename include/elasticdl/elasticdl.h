// Everything a model-zoo file uses: LibTorch, the tf.train.Example parser,
// datasets, the zoo entry types and their registration, trials.
#ifndef ELASTICDL_ELASTICDL_H_
#define ELASTICDL_ELASTICDL_H_

#include <torch/torch.h>

#include "elasticdl/data/dataset.h"
#include "elasticdl/data/example.h"
#include "elasticdl/status.h"
#include "elasticdl/zoo/embedding.h"
#include "elasticdl/zoo/lr_schedule.h"
#include "elasticdl/zoo/metrics.h"
#include "elasticdl/zoo/model.h"
#include "elasticdl/zoo/optimizer.h"
#include "elasticdl/zoo/params.h"
#include "elasticdl/zoo/preprocessing.h"
#include "elasticdl/zoo/registry.h"
#include "elasticdl/zoo/trial.h"

#endif  // ELASTICDL_ELASTICDL_H_
