// The inputs panel: every field of the request the GUI exposes, each with
// the library's error message beside it.
#pragma once

#include "scenario.h"

#include "zeromem/request.h"

#include <QMap>
#include <QString>
#include <QWidget>

class QCheckBox;
class QFormLayout;
class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QSpinBox;
class QPushButton;

namespace zeromem_gui {

/// Model, cluster, training and DeepSpeed-config inputs. Emits changed() on
/// every edit; request() turns the fields into a zeromem::Request.
class InputsPanel : public QWidget {
    Q_OBJECT
public:
    /// Preset lists (models, GPUs, interconnects) come from `data_dir`.
    InputsPanel(const std::string& data_dir, QWidget* parent = nullptr);

    /// Shows `req` and `speed` in the fields (no changed() signal).
    void set_from(const zeromem::Request& req, const SpeedChoice& speed);
    /// `base` with every field of the panel written over it.
    zeromem::Request request(const zeromem::Request& base) const;
    SpeedChoice speed() const;

    /// Shows the library's `message` beside the field whose flag it names
    /// ("--nodes: ..."), or at the top of the panel when it names none.
    void show_error(const QString& message);
    void clear_errors();
    /// The error text beside the field of `flag` ("--params"); "" for the
    /// panel's general line.
    QString error_text(const QString& flag) const;

    // Fields, public for keyboard-driven tests.
    QComboBox* model_source = nullptr;  ///< preset / parameters / config.json / module tree
    QLineEdit* preset_search = nullptr;
    QListWidget* presets = nullptr;
    QLineEdit* params = nullptr;
    QLineEdit* hf_config = nullptr;
    QLineEdit* module_tree = nullptr;   ///< --module-tree (with the config.json field, when filled, for the activations)
    QComboBox* gpu = nullptr;
    QSpinBox* gpus = nullptr;
    QSpinBox* nodes = nullptr;
    QComboBox* interconnect = nullptr;
    QComboBox* network = nullptr;
    QLineEdit* host_memory = nullptr;
    QComboBox* host = nullptr;          ///< --host preset; item 0 = none given
    QComboBox* dtype = nullptr;
    QSpinBox* micro_batch = nullptr;  ///< 0 = not given (the library's default, request_defaults)
    QSpinBox* seq_len = nullptr;
    QSpinBox* grad_accum = nullptr;   ///< 0 = not given (the library's default, request_defaults)
    QComboBox* checkpointing = nullptr;
    QSpinBox* lora_rank = nullptr;
    QComboBox* load_in = nullptr;       ///< --load-in: item 0 = the training dtype, then 4bit, 8bit
    QLineEdit* trainable = nullptr;
    QLineEdit* ds_config = nullptr;

signals:
    void changed();

private:
    QWidget* with_error(QWidget* field, const QString& flag, QWidget* extra = nullptr);
    void build_model_group(QFormLayout* form, const std::string& data_dir);
    void build_cluster_group(QFormLayout* form, const std::string& data_dir);
    void build_training_group(QFormLayout* form);
    void filter_presets(const QString& text);
    void connect_changes();

    QLabel* general_error_ = nullptr;
    QMap<QString, QLabel*> errors_;  ///< flag -> label beside its field
};

}  // namespace zeromem_gui
