;;; ds4spec.el --- completion at point from `ds4spec serve --stdio'  -*- lexical-binding: t -*-

;;; Commentary:
;; A small client for the ds4spec editor protocol (docs/protocol.md): JSON-RPC 2.0 framed with
;; Content-Length headers over the server's stdin/stdout.  `ds4spec-complete' (C-c TAB) sends the text
;; before and after point and inserts the completion at point once it arrives, if the buffer is unchanged.
;; Needs Emacs 27+ built with native JSON (`json-parse-string').  Load it with
;;   (load "/path/to/ds4spec/editors/emacs/ds4spec.el")
;; and set `ds4spec-command' to add flags (--target, --draft, --max-tokens ...).

;;; Code:
(require 'cl-lib)

(defvar ds4spec-command '("ds4spec" "serve" "--stdio")
  "The server command, a list.")
(defvar ds4spec--process nil)
(defvar ds4spec--next-id 0)
(defvar ds4spec--callbacks (make-hash-table) "Request id to the function that takes its response.")

(defun ds4spec--filter (proc output)
  "Collect OUTPUT and dispatch each whole Content-Length frame."
  (with-current-buffer (process-buffer proc)
    (goto-char (point-max))
    (insert output)
    (goto-char (point-min))
    (while (and (looking-at "Content-Length: \\([0-9]+\\)\r\n\r\n")
                (<= (+ (match-end 0) (string-to-number (match-string 1))) (point-max)))
      (let* ((end (+ (match-end 0) (string-to-number (match-string 1))))
             (msg (json-parse-string (decode-coding-string (buffer-substring (match-end 0) end) 'utf-8)
                                     :object-type 'plist :null-object nil))
             (callback (gethash (plist-get msg :id) ds4spec--callbacks)))
        (delete-region (point-min) end)
        (when (and callback (not (plist-member msg :method)))
          (remhash (plist-get msg :id) ds4spec--callbacks)
          (funcall callback msg))))))

(defun ds4spec-start ()
  "Start the server unless it runs."
  (unless (process-live-p ds4spec--process)
    (setq ds4spec--process
          (make-process :name "ds4spec" :command ds4spec-command :connection-type 'pipe
                        :coding 'binary :noquery t :filter #'ds4spec--filter
                        :stderr (get-buffer-create "*ds4spec-log*")
                        :buffer (with-current-buffer (generate-new-buffer " *ds4spec*")
                                  (set-buffer-multibyte nil)
                                  (current-buffer)))))
  ds4spec--process)

(defun ds4spec--send (message)
  "Frame MESSAGE (a plist) and send it."
  (let ((body (encode-coding-string (json-serialize message) 'utf-8)))
    (process-send-string (ds4spec-start) (format "Content-Length: %d\r\n\r\n%s" (length body) body))))

(defun ds4spec--request (method params callback)
  "Send request METHOD with PARAMS; CALLBACK gets the response plist."
  (let ((id (cl-incf ds4spec--next-id)))
    (puthash id callback ds4spec--callbacks)
    (ds4spec--send (list :jsonrpc "2.0" :id id :method method :params params))
    id))

(defun ds4spec-complete ()
  "Insert ds4spec's completion at point, filling in the middle, if the buffer is unchanged by then."
  (interactive)
  (let ((buffer (current-buffer)) (pos (point)) (tick (buffer-chars-modified-tick)))
    (ds4spec--request
     "complete"
     (list :prefix (buffer-substring-no-properties (point-min) pos)
           :suffix (buffer-substring-no-properties pos (point-max))
           :document (or buffer-file-name (buffer-name)) :stop_at "block")
     (lambda (msg)
       (let ((result (plist-get msg :result)))
         (if (not result)
             (message "ds4spec: %s" (plist-get (plist-get msg :error) :message))
           (when (buffer-live-p buffer)
             (with-current-buffer buffer
               (when (= tick (buffer-chars-modified-tick))
                 (goto-char pos)
                 (insert (plist-get result :text)))))))))))

(defun ds4spec-stop ()
  "Ask the server to shut down and exit."
  (when (process-live-p ds4spec--process)
    (ds4spec--request "shutdown" nil (lambda (_) (ds4spec--send '(:jsonrpc "2.0" :method "exit"))))
    (with-timeout (2 (delete-process ds4spec--process))
      (while (process-live-p ds4spec--process) (accept-process-output ds4spec--process 0.05)))))

(add-hook 'kill-emacs-hook #'ds4spec-stop)
(global-set-key (kbd "C-c TAB") #'ds4spec-complete)

(provide 'ds4spec)
;;; ds4spec.el ends here
